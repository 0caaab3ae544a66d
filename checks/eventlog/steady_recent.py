"""The last lines the fast path (:mod:`.steady`) took in, kept to be lowered again on demand.

A finding carries the events of its iteration and the two before it (``Finding.recent``). The
fast path makes no event of a line it takes in, so it keeps the last few lines with what they
changed (the batch before each, and the tables each touched as they were), and lowers them again
only when the full path takes over: from the live tables, undoing the newest line first.
"""

from __future__ import annotations

from collections import deque

from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.version2 import IterationLine
from kvsched.checks.monitor.runtime import RECENT
from kvsched.spec.events import IterationEvent

Undo = dict[str, tuple[int, ...]]
"""The tables a line changed, as they were before it."""
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
        the tables it changed were ``undo``."""
        self.lines.append((line, waiting, batch, undo))

    def replay(self, lowering: Lowering) -> list[IterationEvent]:
        """The events of the lines kept, oldest first, as the full path would have made them;
        ``lowering`` is as the newest line left it. Forgets the lines."""
        tables = dict(lowering.tables)
        states = []
        for line, waiting, batch, undo in reversed(self.lines):
            for rid, table in undo.items():
                if table:
                    tables[rid] = table
                else:
                    tables.pop(rid, None)
            states.append((line, waiting, batch, dict(tables)))
        self.lines.clear()
        return [
            lowering.at(before, batch).lower(line, waiting, "")
            for line, waiting, batch, before in reversed(states)
        ]
