"""The last lines the fast path (:mod:`.steady`) took in, kept to be lowered again on demand.

A finding carries the events of its iteration and the two before it (``Finding.recent``). The
fast path makes no event of a line it takes in, so it keeps the last few lines with the batch
before each, and lowers them again only when a finding needs them: from the live tables as the
full path took over, undoing the newest line first. A line taken in changes tables only by
allocating at their end (a table that begins may begin with shared pages) and by finishing
requests, so undoing it cuts its allocations off and puts back the tables it ended or began,
which it keeps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial

from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.version2 import Alloc, IterationLine, Share
from kvsched.checks.monitor.runtime import RECENT, Later
from kvsched.spec.events import IterationEvent

Undo = dict[str, tuple[int, ...] | None]
"""The tables a line ended (its finished requests') or began, as they were before it (``None``:
no table)."""
Taken = tuple[IterationLine, tuple[str, ...], tuple[str, ...], Undo]
"""A line, its queue, the batch before it and its :data:`Undo`."""


class TakenLines:
    """The last :data:`~kvsched.checks.monitor.runtime.RECENT` lines taken in."""

    def __init__(self) -> None:
        self.lines: deque[Taken] = deque(maxlen=RECENT)

    def record(
        self, line: IterationLine, waiting: tuple[str, ...], batch: tuple[str, ...], undo: Undo
    ) -> None:
        """``line`` (its queue ``waiting``), taken in: the batch was ``batch`` before it, and
        the tables it ended or began were ``undo``."""
        self.lines.append((line, waiting, batch, undo))

    def later(self, lowering: Lowering) -> list[Later]:
        """The events of the lines kept, oldest first, each made only when called, as the full
        path would have made it; ``lowering`` is as the newest line left it. Forgets the lines.
        A finding carries the last few iterations' events, so most are never made: what is
        kept is the lines and a copy of the live tables, and all are lowered on the first call."""
        if not self.lines:
            return []
        lines, tables = list(self.lines), dict(lowering.tables)
        self.lines.clear()
        made: list[IterationEvent] = []

        def events() -> list[IterationEvent]:
            if not made:
                made.extend(_replay(lines, tables, lowering))
            return made

        return [partial(_nth, events, index) for index in range(len(lines))]


def _nth(events: Callable[[], list[IterationEvent]], index: int) -> IterationEvent:
    return events()[index]


def _replay(
    lines: list[Taken], tables: dict[str, tuple[int, ...]], lowering: Lowering
) -> list[IterationEvent]:
    """The events of ``lines``, oldest first, from ``tables`` as the newest line left them."""
    states = []
    for line, waiting, batch, undo in reversed(lines):
        for op in reversed(line.ops):
            if type(op) in (Alloc, Share) and op.request not in undo:  # type: ignore[union-attr]
                table = tables[op.request]  # type: ignore[union-attr]
                tables[op.request] = table[: len(table) - len(op.pages)]  # type: ignore[union-attr,arg-type]
        for rid, ended in undo.items():
            if ended is None:
                tables.pop(rid, None)
            else:
                tables[rid] = ended
        states.append((line, waiting, batch, dict(tables)))
    return [
        lowering.at(before, batch).lower(line, waiting, "")
        for line, waiting, batch, before in reversed(states)
    ]
