"""The efficiency layer's figures (spec/semantics.md, section 8; ``EFFICIENCY`` in
spec/invariants.py): measured from a run's events, reported, never a violation.

- EFF-1 idle slot-iterations while a fitting request waited: per iteration, the free slots (at
  most one per waiting request) while the request at the head of the queue after the iteration's
  admissions had its prompt and output so far plus one token fit the pages left free;
- EFF-2 pages reserved but unused: per iteration, pages held beyond ``ceil(KV / page_size)`` by
  the active requests, summed (page-iterations);
- EFF-3 preemptions;
- EFF-4 recomputed tokens: KV computed again below the most a request had held before.

A request's KV is what it computed or took from the cache since it was last admitted; in the
lesson model (no ``computed`` in the events) it is its prompt plus its output including this
iteration's token (section 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Request, Workload, pages_for

from .record import Records, as_dict, lesson_computed


@dataclass(frozen=True)
class Efficiency:
    """The efficiency figures of one run, by their ids."""

    idle_slot_iterations: int
    """EFF-1."""
    unused_page_iterations: int
    """EFF-2."""
    preemptions: int
    """EFF-3."""
    recomputed_tokens: int
    """EFF-4."""

    def by_id(self) -> dict[str, int]:
        return {
            "EFF-1": self.idle_slot_iterations,
            "EFF-2": self.unused_page_iterations,
            "EFF-3": self.preemptions,
            "EFF-4": self.recomputed_tokens,
        }


def measure(
    workload: Workload,
    events: Iterable[IterationEvent],
    properties: TargetProperties | None = None,
) -> Efficiency:
    """The figures of a run of ``workload`` whose events are ``events``."""
    meter = Meter(workload, properties)
    for event in events:
        meter.observe(event)
    return meter.figures()


class Meter:
    """The figures so far, one event at a time, read off the requests' records
    (:mod:`.record`): its own, or those of the monitor that judges the same events first."""

    def __init__(
        self,
        workload: Workload,
        properties: TargetProperties | None = None,
        records: Records | None = None,
        in_use: Callable[[IterationEvent], int] | None = None,
    ) -> None:
        self.declared = properties or TargetProperties()
        self.limits = workload.limits
        self.in_use = in_use
        """The distinct pages an event's batch held, from the owner of ``records``, who has
        judged the event (its page ledger knows them); ``None``: counted from its tables."""
        self.usable = self.declared.usable_pages(self.limits)
        self.counts = records is None
        """Whether the meter counts each event into its records itself: else their owner has
        counted the event when the meter observes it."""
        self.records = Records(self.declared, self.limits.page_size) if records is None else records
        if self.counts:
            for request in workload.requests:
                self.records.declare(request)
        self.idle = self.unused = self.preemptions = 0
        self.held = DistinctPages()

    def declare(self, request: Request) -> None:
        """A request declared after the workload was given (an event log's request line)."""
        if self.counts:
            self.records.declare(request)

    def figures(self) -> Efficiency:
        return Efficiency(self.idle, self.unused, self.preemptions, self.records.recomputed)

    def observe(self, event: IterationEvent) -> None:
        # This runs over the batch every iteration. Compiled, ``records.get`` is a native call (a
        # bound method would be called through Python), and the tables are read as a dict.
        records, page_size = self.records, self.limits.page_size
        if self.counts:
            self._count(event)
        self.preemptions += len(event.preempted)
        tables = as_dict(event.page_tables)
        unused = 0
        for rid in event.active:
            record = records.get(rid)  # a finished request is forgotten (the monitor says what
            if record is None:  # is wrong with a batch that lists it)
                continue
            extra = len(tables.get(rid, ())) + (-record.kv // page_size)  # beyond pages_for
            if extra > 0:
                unused += extra
        self.unused += unused
        # The head the schedule saw is unknown after an abort from the queue (eventlog.md 4.9).
        if not event.finished_outside_the_batch:
            in_use = self.in_use
            if in_use is None:
                self.count_idle(len(event.active), event.waiting, lambda: self.held.count(tables))
            else:
                self.count_idle(len(event.active), event.waiting, lambda: in_use(event))
        if self.counts:
            for rid in event.finished:
                records.finish(rid)

    def _count(self, event: IterationEvent) -> None:
        """The event's tokens into the meter's own records, as the monitor counts them."""
        records = self.records
        records.begin()
        for rid in event.preempted:
            records.preempt(rid)
        for rid in event.admitted:
            records.admit(rid)
        computed = event.computed
        if computed is None:
            live = records.live
            computed = lesson_computed(live, event.active, event.admitted, event.decoded)
        records.count(computed, event.cached, event.decoded)

    def count_idle(self, active: int, waiting: Sequence[str], in_use: Callable[[], int]) -> None:
        """EFF-1 for one iteration: ``active`` requests ran while ``waiting`` waited, and the
        batch's tables held ``in_use()`` distinct pages."""
        free_slots = self.limits.batch_limit - active
        if free_slots > 0 and waiting:
            head = self.records.live.get(waiting[0])
            free_pages = self.usable - in_use() - self.declared.watermark_pages
            needed = 0 if head is None else head.prompt_tokens + head.generated + 1
            if head is not None and pages_for(needed, self.limits.page_size) <= free_pages:
                self.idle += min(free_slots, len(waiting))


class DistinctPages:
    """The distinct pages a run's page tables hold (:attr:`IterationEvent.pages_in_use`), kept
    from one count to the next at the cost of the tables that changed since.

    A serving engine's tables mostly carry over from one iteration to the next, the same tuples,
    or grow at their end by a page, while counting every page of a 64-slot batch afresh was a
    large share of the meter's work on a recorded vLLM log. tests/cover/test_efficiency.py counts
    both ways over random tables and over engine runs."""

    def __init__(self) -> None:
        self.tables: dict[str, tuple[int, ...]] = {}
        """The tables of the last count."""
        self.holders: Counter[int] = Counter()
        """How many of those tables hold each page they hold."""

    def count(self, tables: Mapping[str, tuple[int, ...]]) -> int:
        """The distinct pages of ``tables``."""
        last, holders = self.tables, self.holders
        for rid in [rid for rid in last if rid not in tables]:
            self._drop(last.pop(rid))
        for rid, table in tables.items():
            before = last.get(rid)
            if before is table:
                continue
            if before is None:
                holders.update(table)  # a Counter counts a sequence in C
            elif table[: len(before)] == before:
                holders.update(table[len(before) :])
            else:
                self._drop(before)
                holders.update(table)
            last[rid] = table
        return len(holders)

    def _drop(self, table: tuple[int, ...]) -> None:
        holders = self.holders
        for page in table:
            if holders[page] == 1:
                holders.pop(page)  # dict's own: Counter's __delitem__ is a Python call
            else:
                holders[page] -= 1
