"""Ordered lists of request indices as Z3 terms: the running batch and the waiting queue.

The reference keeps both as Python lists whose order decides who is preempted (the last
admitted) and who is admitted next (the queue's head, where a preempted request goes back). A
list of at most ``n`` requests is ``n`` slots and a length; slots past the length hold
:data:`EMPTY`. Every operation takes a guard, so one unrolled loop body serves every path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

EMPTY = -1


@dataclass(frozen=True)
class Slots:
    items: tuple[Any, ...]
    length: Any

    @staticmethod
    def empty(capacity: int) -> Slots:
        return Slots(tuple(z3.IntVal(EMPTY) for _ in range(capacity)), z3.IntVal(0))

    def at(self, k: Any) -> Any:
        """The request in slot ``k`` (a term), :data:`EMPTY` past the length."""
        value: Any = z3.IntVal(EMPTY)
        for j in reversed(range(len(self.items))):
            value = z3.If(z3.And(k == j, j < self.length), self.items[j], value)
        return value

    def head(self) -> Any:
        return self.at(0)

    def last(self) -> Any:
        return self.at(self.length - 1)

    def contains(self, i: int) -> Any:
        return z3.Or(*[z3.And(j < self.length, x == i) for j, x in enumerate(self.items)])

    def append(self, x: Any, when: Any) -> Slots:
        items = tuple(
            z3.If(z3.And(when, self.length == j), x, item) for j, item in enumerate(self.items)
        )
        return Slots(items, self.length + z3.If(when, 1, 0))

    def push_front(self, x: Any, when: Any) -> Slots:
        shifted = (x, *self.items[:-1])
        items = tuple(z3.If(when, new, old) for new, old in zip(shifted, self.items, strict=True))
        return Slots(items, self.length + z3.If(when, 1, 0))

    def remove(self, x: Any, when: Any) -> Slots:
        """Drop ``x`` where it stands, closing the gap; nothing when it is absent."""
        items, seen = [], z3.BoolVal(False)
        following = (*self.items[1:], z3.IntVal(EMPTY))
        for j, item in enumerate(self.items):
            seen = z3.Or(seen, z3.And(j < self.length, item == x))
            items.append(z3.If(z3.And(when, seen), following[j], item))
        return Slots(tuple(items), self.length - z3.If(z3.And(when, seen), 1, 0))

    def simplified(self) -> Slots:
        return Slots(tuple(z3.simplify(x) for x in self.items), z3.simplify(self.length))
