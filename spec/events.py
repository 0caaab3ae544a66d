"""The per-iteration event: what happened in one iteration of a run (spec/semantics.md, section 6).

The engine emits one :class:`IterationEvent` per iteration; the metrics, the runtime monitor and
the JSONL event log are all computed from these and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

OpKind = Literal["arrive", "preempt", "free", "admit", "alloc", "share"]
"""What an engine does to one request while it schedules an iteration, in the order it does it
(spec/eventlog.md, version 2): the step's computation and the end-of-iteration finishes and frees
are summarized by the event's other fields."""
OP_KINDS: tuple[OpKind, ...] = get_args(OpKind)


@dataclass(frozen=True)
class Op:
    """One scheduling operation on ``request``; ``pages`` for ``free``, ``alloc`` and ``share``."""

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
    """Requests preempted in this iteration: they released every page (listed in ``freed``, or
    in ``preempt_freed`` when that is set) before this iteration's allocation and went back to
    the waiting queue."""
    preempt_freed: Mapping[str, tuple[int, ...]] | None = None
    """Pages released by this iteration's preemptions, apart from ``freed``, which then holds only
    the releases at the end of the iteration. ``None``: ``freed`` holds both (version 1 logs), so
    a request preempted, re-admitted and finished in one iteration cannot be told apart there."""
    schedule: tuple[Op, ...] | None = None
    """The scheduling operations in the order the engine did them (an event log of version 2).
    ``None``: the fixed order of version 1 (preemptions, admissions, then allocation), with the
    pages of a preempted request in ``freed``. When set, ``freed`` holds only the frees at the end
    of the iteration and ``admitted``, ``preempted``, ``allocated`` and ``shared`` summarize it."""

    @property
    def finished_outside_the_batch(self) -> bool:
        """Whether a request finished without being in the batch: an abort from the queue
        (eventlog.md 4.9), after the schedule, so ``waiting`` no longer shows the queue the
        schedule saw; or a log in error."""
        return bool(self.finished) and not set(self.finished).issubset(self.active)

    @property
    def pages_in_use(self) -> int:
        """Distinct physical pages held while this iteration decoded."""
        return len({page for table in self.page_tables.values() for page in table})
