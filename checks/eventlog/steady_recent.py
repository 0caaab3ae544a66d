"""The last lines the fast path (:mod:`.steady`) took in, kept to be lowered again on demand.

A finding carries the events of its iteration and the two before it (``Finding.recent``). The
fast path makes no event of a line it takes in, so it keeps the last few lines with the batch
before each, and lowers them again only when the full path takes over: from the live tables,
undoing the newest line first. A line taken in changes tables only by allocating at their end
and by finishing requests, so undoing it cuts its allocations off and puts back the tables it
ended or began, which it keeps.
"""

from __future__ import annotations

from collections import deque

from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.version2 import Alloc, IterationLine
from kvsched.checks.monitor.runtime import RECENT
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

    def replay(self, lowering: Lowering) -> list[IterationEvent]:
        """The events of the lines kept, oldest first, as the full path would have made them;
        ``lowering`` is as the newest line left it. Forgets the lines."""
        tables = dict(lowering.tables)
        states = []
        for line, waiting, batch, undo in reversed(self.lines):
            for op in reversed(line.ops):
                if type(op) is Alloc and op.request not in undo:
                    table = tables[op.request]
                    tables[op.request] = table[: len(table) - len(op.pages)]  # type: ignore[arg-type]
            for rid, ended in undo.items():
                if ended is None:
                    tables.pop(rid, None)
                else:
                    tables[rid] = ended
            states.append((line, waiting, batch, dict(tables)))
        self.lines.clear()
        return [
            lowering.at(before, batch).lower(line, waiting, "")
            for line, waiting, batch, before in reversed(states)
        ]
