"""What a long check is doing, told as it goes: the phase, how far it is, and early results.

A check can take minutes (Hypothesis's examples, Z3's proofs) and knows some of its verdicts in
the first second (``allocate_kv_pages``). The judge and the search tell a :class:`Listener`
through the three functions here; whoever runs the check chooses the listener with
:func:`listening` (the command line draws it on a terminal). Without one, nothing is told and
nothing is printed: the functions cost a context-variable read, and the check's result never
depends on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Failed:
    """A violation found before the check ends: what remains is making its witness small, so
    whoever watches knows the answer is FAIL while the shrinking goes on."""

    invariant: str
    where: str
    """Where it broke, in words: "iteration 12 of the teaching trace"."""


class Listener(Protocol):
    """Receives a check's progress; its methods must not raise."""

    def phase(self, name: str, total: int | None) -> None:
        """A phase starts: ``name`` in words, ``total`` steps if known (Hypothesis's examples)."""

    def advance(self, done: int) -> None:
        """``done`` steps of the current phase are done."""

    def result(self, found: object) -> None:
        """A result known before the end (the allocator's verdict, an
        :class:`~kvsched.checks.verdict.report.AllocatorVerdict`; a :class:`Failed`), for the
        listener to word."""


_LISTENER: ContextVar[Listener | None] = ContextVar("kvsched_progress", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell ``listener`` the progress of every check run inside the block."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def phase(name: str, total: int | None = None) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.phase(name, total)


def advance(done: int) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.advance(done)


def result(found: object) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.result(found)


def failed(invariant: str, where: str) -> None:
    """Tell that ``invariant`` broke ``where``: the check will fail, whatever it does next."""
    result(Failed(invariant, where))


@contextmanager
def within(part: str) -> Iterator[None]:
    """Tell every phase of the block as a phase of ``part`` ("mutant 3/38, leak on finish"), so
    a command running many checks shows which one a phase belongs to."""
    listener = _LISTENER.get()
    if listener is None:
        yield
        return
    with listening(_Within(part, listener)):
        yield


class _Within:
    def __init__(self, part: str, listener: Listener) -> None:
        self.part = part
        self.listener = listener

    def phase(self, name: str, total: int | None) -> None:
        self.listener.phase(f"{self.part}: {name}", total)

    def advance(self, done: int) -> None:
        self.listener.advance(done)

    def result(self, found: object) -> None:
        self.listener.result(found)
