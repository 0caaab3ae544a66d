"""The engine's waiting queue, and the immutable view of it that each event keeps (section 6).

The engine's queue is every arrived request in arrival order, minus those the scheduler admitted.
An event must keep the queue as it was in its iteration, and a long queue copied into every event
costs memory in iterations times queue length. The arrival order only ever grows at its end, so
an event's queue is a window ``[start, stop)`` of one shared, append-only list of arrivals, less
the few requests in that window that were admitted ahead of their turn: :class:`QueueView` keeps
just that, O(1) per event for a first-come-first-served scheduler, and shares the set of holes
between events while it is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload


class QueueView(Sequence[str]):
    """An immutable sequence of the request ids waiting in one iteration, in queue order.

    It compares equal to a tuple of the same ids in the same order (what an event log reads
    back), and hashes like that tuple.
    """

    __slots__ = ("_gone", "_order", "_position", "_start", "_stop")

    def __init__(
        self,
        order: list[str],
        position: dict[str, int],
        start: int,
        stop: int,
        gone: frozenset[str],
    ) -> None:
        # order and position only ever grow past ``stop``, so this window never changes.
        self._order = order
        self._position = position
        self._start = start
        self._stop = stop
        self._gone = gone

    def __len__(self) -> int:
        return self._stop - self._start - len(self._gone)

    def __iter__(self) -> Iterator[str]:
        window = self._order[self._start : self._stop]
        if not self._gone:
            return iter(window)
        return (rid for rid in window if rid not in self._gone)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if not self._gone and isinstance(index, int) and 0 <= index < len(self):
            return self._order[self._start + index]
        return tuple(self)[index]

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str) or value in self._gone:
            return False
        index = self._position.get(value)
        return index is not None and self._start <= index < self._stop

    def __eq__(self, other: object) -> bool:
        if isinstance(other, QueueView | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy or a pickle needs only the ids, not the whole shared arrival order.
        return (tuple, (tuple(self),))


class WaitingQueue:
    """The engine's queue: arrivals appended in order, admissions removed from anywhere."""

    def __init__(self) -> None:
        self._order: list[str] = []
        self._position: dict[str, int] = {}
        self._start = 0  # everything before it has been admitted
        self._gone: set[str] = set()  # admitted, but behind a request still waiting
        self._view: QueueView | None = None  # the current queue, shared until it changes

    def arrive(self, request_id: str) -> None:
        if request_id in self._position:
            return  # handed over twice: the scheduler's business, the queue keeps its first turn
        self._position[request_id] = len(self._order)
        self._order.append(request_id)
        self._view = None

    def admit(self, request_id: str) -> None:
        index = self._position.get(request_id)
        if index is None or index < self._start or request_id in self._gone:
            return  # not waiting: admitted before, or never handed over
        self._gone.add(request_id)
        while self._start < len(self._order) and self._order[self._start] in self._gone:
            self._gone.discard(self._order[self._start])
            self._start += 1
        self._view = None

    def view(self) -> QueueView:
        """The queue as it is now, as an immutable value."""
        if self._view is None:
            gone = frozenset(self._gone)
            self._view = QueueView(self._order, self._position, self._start, len(self._order), gone)
        return self._view

    def __contains__(self, request_id: str) -> bool:
        return request_id in self.view()
