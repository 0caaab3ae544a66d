"""What a clean log's lines say, for the plantings of tests/planted.py: the iterations, and for
version 2 the tables and the batch that the operations build (spec/eventlog.md, 8.2).

A version-1 line states its tables (``page_tables``, after the allocation) and its batch; a
version-2 line states deltas, so :func:`walk` replays them, line by line, as the reader does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Rows = list[dict[str, Any]]
Tables = dict[str, list[int]]

STEP = ("cache", "compute", "token", "decode")
SCHEDULE = ("preempt", "admit", "alloc", "share")


def iterations(rows: Rows) -> list[dict[str, Any]]:
    return [row for row in rows if row.get("type") == "iteration"]


def schedule_end(ops: list[Any]) -> int:
    """The index of the first operation after the schedule (of the step or the update)."""
    return next((i for i, op in enumerate(ops) if op[0] in (*STEP, "finish")), len(ops))


def apply(tables: Tables, batch: dict[str, None], ops: list[Any]) -> None:
    """Version-2 operations on the live tables and the batch, as the reader applies them."""
    for op in ops:
        kind, rid = op[0], op[1]
        if kind in ("alloc", "share"):
            tables.setdefault(rid, []).extend(op[2])
        elif kind == "free":
            kept = [p for p in tables.get(rid, []) if p not in set(op[2])]
            if kept:
                tables[rid] = kept
            else:
                tables.pop(rid, None)
        elif kind == "admit":
            batch[rid] = None
        elif kind in ("preempt", "finish"):
            batch.pop(rid, None)


@dataclass
class Line:
    """An iteration line (``row``, to edit) with the tables the line before left (``before``)
    and, in version 2, the batch before it."""

    row: dict[str, Any]
    version: int
    before: Tables
    batch: dict[str, None]

    @property
    def iteration(self) -> int:
        return int(self.row["iteration"])

    @property
    def ops(self) -> list[Any]:
        return self.row["ops"]  # type: ignore[no-any-return]

    def scheduled(self) -> Tables:
        """A fresh copy of every active table once the schedule is done: ``page_tables`` in
        version 1, what a ``tables`` snapshot holds in version 2."""
        if self.version == 1:
            return {rid: list(t) for rid, t in self.row["page_tables"].items()}
        tables = {rid: list(t) for rid, t in self.before.items()}
        batch = dict(self.batch)
        apply(tables, batch, self.ops[: schedule_end(self.ops)])
        return {rid: tables[rid] for rid in batch if tables.get(rid)}

    def after(self) -> Tables:
        """Every table once the line is done, its frees included."""
        if self.version == 1:
            freed = self.row["freed"]
            return {
                rid: kept
                for rid, table in self.row["page_tables"].items()
                if (kept := [p for p in table if p not in freed.get(rid, ())])
            }
        tables = {rid: list(t) for rid, t in self.before.items()}
        apply(tables, dict(self.batch), self.ops)
        return tables

    def running(self) -> list[str]:
        """Requests in the batch before this line and still in it, not admitted in it."""
        if self.version == 1:
            return [r for r in self.row["active"] if r not in self.row["admitted"]]
        touched = {op[1] for op in self.ops if op[0] in ("admit", "preempt")}
        return [rid for rid in self.batch if rid not in touched]


def walk(rows: Rows) -> Iterator[Line]:
    """The iteration lines of a clean log, in order, each with the state before it."""
    version = int(rows[0]["version"])
    tables: Tables = {}
    batch: dict[str, None] = {}
    for row in iterations(rows):
        line = Line(row, version, {r: list(t) for r, t in tables.items()}, dict(batch))
        yield line
        if version == 2:
            apply(tables, batch, row["ops"])
        else:
            tables = line.after()


def admission_blocks(ops: list[Any]) -> list[tuple[int, int]]:
    """Each admission of a version-2 schedule with the operations up to the next admission or
    the schedule's end (its pages, usually), as index ranges."""
    end = schedule_end(ops)
    starts = [i for i in range(end) if ops[i][0] == "admit"]
    if not starts:
        return []
    return [(s, e) for s, e in zip(starts, [*starts[1:], end], strict=True)]
