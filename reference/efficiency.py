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
from collections.abc import Iterable
from dataclasses import dataclass

from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload, pages_for


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
    declared = properties or TargetProperties()
    limits = workload.limits
    usable = declared.usable_pages(limits)
    requests = {r.id: r for r in workload.requests}
    kv: Counter[str] = Counter()
    most: Counter[str] = Counter()
    generated: Counter[str] = Counter()
    idle = unused = preemptions = recomputed = 0
    for event in events:
        preemptions += len(event.preempted)
        for rid in event.preempted:
            kv[rid] = 0
        generated.update(event.decoded)
        if event.computed is None:
            for rid in event.active:
                kv[rid] = requests[rid].prompt_tokens + generated[rid]
        else:
            for amounts in (event.computed, event.cached):
                for rid, amount in amounts.items():
                    kv[rid] += amount
            for rid, amount in event.computed.items():
                recomputed += max(0, min(amount, most[rid] - (kv[rid] - amount)))
        for rid in event.active:
            most[rid] = max(most[rid], kv[rid])
            held = len(event.page_tables.get(rid, ()))
            unused += max(0, held - pages_for(kv[rid], limits.page_size))
        free_slots = limits.batch_limit - len(event.active)
        if free_slots > 0 and event.waiting:
            head = requests.get(event.waiting[0])
            free_pages = usable - event.pages_in_use - declared.watermark_pages
            needed = 0 if head is None else head.prompt_tokens + generated[head.id] + 1
            if head is not None and pages_for(needed, limits.page_size) <= free_pages:
                idle += min(free_slots, len(event.waiting))
        for rid in event.finished:
            kv.pop(rid, None)
    return Efficiency(idle, unused, preemptions, recomputed)
