"""The per-iteration event: what happened in one iteration of a run (spec/semantics.md, section 6).

The engine emits one :class:`IterationEvent` per iteration; the metrics, the runtime monitor and
the JSONL event log are all computed from these and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

OpKind = Literal["arrive", "preempt", "free", "admit", "alloc", "share", "lose"]
"""What an engine does to one request while it schedules an iteration, in the order it does it
(spec/eventlog.md, version 2): the step's computation and the end-of-iteration finishes and frees
are summarized by the event's other fields. ``lose`` is no engine's operation: it is how a page
table that changed without the allocations and frees that explain it is lowered (pages that left
the table unfreed), so that the monitor judges it instead of missing it."""


@dataclass(frozen=True)
class Op:
    """One scheduling operation on ``request``; ``pages`` for ``free``, ``alloc``, ``share`` and
    ``lose``."""

    kind: OpKind
    request: str
    pages: tuple[int, ...] = ()


@dataclass(frozen=True)
class IterationEvent:
    """One iteration, numbered from 1, as the engine observed it."""

    iteration: int
    arrived: tuple[str, ...]
    """Requests handed to the scheduler before this iteration was scheduled."""
    admitted: tuple[str, ...]
    """Requests that joined the batch in this iteration."""
    active: tuple[str, ...]
    """The batch in this iteration, in admission order: admitted now or earlier, not finished."""
    decoded: tuple[str, ...]
    """One entry per token produced in this iteration (a request listed twice produced two)."""
    finished: tuple[str, ...]
    """Requests the scheduler declared finished at the end of this iteration."""
    page_tables: Mapping[str, tuple[int, ...]]
    """Page table of every active request while it decoded (after this iteration's allocation)."""
    allocated: Mapping[str, tuple[int, ...]]
    """Pages that appeared in a request's page table in this iteration."""
    freed: Mapping[str, tuple[int, ...]]
    """Pages released at the end of this iteration, by request."""
    free_pages: int
    """Free pages the scheduler reported after this iteration."""
    waiting: Sequence[str]
    """Arrived requests that were neither active nor finished in this iteration, queue order.
    Immutable, and equal to the tuple of those ids; the engine shares one queue between events
    instead of copying it into each (a long queue times many iterations would not fit memory)."""

    schedule: tuple[Op, ...]
    """The scheduling operations in the order the engine did them. A version-2 log lists them;
    a version-1 line and an in-process run are lowered to them in version 1's fixed order
    (:func:`fixed_order`). ``admitted``, ``preempted``, ``allocated`` and ``shared`` summarize
    them, and ``freed`` holds only the frees at the end of the iteration."""

    # Real-engine extensions (spec/eventlog.md, section 4). The defaults are the lesson model, in
    # which the engine never sets them.
    computed: Mapping[str, int] | None = None
    """Tokens whose KV each request computed in this iteration: a prompt chunk, a recompute after
    preemption, or the one decode token. ``None``: the lesson model, where the admission iteration
    computes the prompt plus the first token and every later iteration one token."""
    cached: Mapping[str, int] = field(default_factory=dict)
    """Tokens whose KV a request took from shared pages (a prefix-cache hit) without computing."""
    shared: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Pages of ``allocated`` that a request took by reference (prefix sharing), not fresh."""
    preempted: tuple[str, ...] = ()
    """Requests preempted in this iteration: they released every page (``free`` operations of the
    schedule) before this iteration's allocation and went back to the waiting queue."""
    slots: Mapping[str, int] | None = None
    """Under a declared ``state_slots``: each request holding a state slot after the schedule,
    with its slot id (spec/semantics.md 4.2); ``None``: the target has no state slots."""
    slots_after: Mapping[str, int] | None = None
    """The same after the update: who still holds a slot once the finished requests left."""
    free_slots: int | None = None
    """The state slots the target counted as free after the update."""

    @property
    def finished_outside_the_batch(self) -> bool:
        """Whether a request finished without being in the batch: an abort from the queue
        (eventlog.md 4.9), after the schedule, so ``waiting`` no longer shows the queue the
        schedule saw; or a log in error."""
        return bool(self.finished) and not set(self.finished).issubset(self.active)

    def tables_after(self) -> dict[str, tuple[int, ...]]:
        """Every table as the iteration ended, after its frees and without its finished
        requests: what the next iteration's tables grow from (:func:`fixed_order`)."""
        tables = dict(self.page_tables)
        for rid, pages in self.freed.items():
            if rid in tables:
                gone = set(pages)
                tables[rid] = tuple(p for p in tables[rid] if p not in gone)
        for rid in self.finished:
            tables.pop(rid, None)
        return tables

    @property
    def pages_in_use(self) -> int:
        """Distinct physical pages held while this iteration decoded."""
        return len({page for table in self.page_tables.values() for page in table})


def fixed_order(
    before: Mapping[str, tuple[int, ...]],
    preempted: Sequence[str],
    released: Mapping[str, tuple[int, ...]],
    admitted: Sequence[str],
    tables: Mapping[str, tuple[int, ...]],
    shared: Mapping[str, tuple[int, ...]],
) -> tuple[tuple[Op, ...], dict[str, tuple[int, ...]]]:
    """An iteration reported as version 1 reports it, as operations: each preemption with the
    pages it ``released``, the admissions, then how each page table grew from ``before`` (the
    tables the previous iteration ended with) to ``tables``. Also the pages each table gained.
    A table missing from ``tables`` is no operation: the monitor's page step finds it.

    A table that only grew at its end is an allocation, its pages in ``shared`` taken by
    reference. One that lost pages, or changed their order, without a free keeps its common
    beginning: the rest is a ``lose``, then the table's new rest is taken, so the monitor judges
    what no operation explains (PAGE-3) instead of missing it.
    """
    ops: list[Op] = []
    for rid in preempted:
        ops += (Op("preempt", rid), Op("free", rid, tuple(released.get(rid, ()))))
    ops += (Op("admit", rid) for rid in admitted)
    gained: dict[str, tuple[int, ...]] = {}
    gone = set(preempted)
    for rid, now in tables.items():
        base = () if rid in gone else before.get(rid, ())
        if now is base or now == base:  # most requests in most iterations
            continue
        kept = len(base)
        if now[:kept] != base:
            # The first place they differ, or the end of a table that only shrank.
            pairs = zip(base, now, strict=False)
            kept = next((i for i, (a, b) in enumerate(pairs) if a != b), len(now))
            ops.append(Op("lose", rid, base[kept:]))
        new = now[kept:]
        if new:
            gained[rid] = new
        for by_reference, pages in _runs(new, set(shared.get(rid, ()))):
            ops.append(Op("share" if by_reference else "alloc", rid, pages))
    return tuple(ops), gained


def _runs(pages: tuple[int, ...], shared: set[int]) -> list[tuple[bool, tuple[int, ...]]]:
    """``pages`` cut where they pass between shared and fresh, in table order."""
    if not shared:
        return [(False, pages)] if pages else []
    runs: list[tuple[bool, list[int]]] = []
    for page in pages:
        by_reference = page in shared
        if runs and runs[-1][0] == by_reference:
            runs[-1][1].append(page)
        else:
            runs.append((by_reference, [page]))
    return [(by_reference, tuple(run)) for by_reference, run in runs]
