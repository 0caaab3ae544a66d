"""Planted bugs of the engine scheduler that only the search's corners reach.

Each is a bug class reported against a real engine (vLLM, TensorRT-LLM, nano-vllm), planted
in the reference engine scheduler as a class that ``kvsched check`` runs itself, so the search
must draw the workload that shows it: no fixed workload in the zoo hands it over.

- priority preemption (vLLM): under priority order the victim is the lowest priority, which may
  be a request scheduled earlier in the same ``schedule()`` (a low-priority request running
  ahead of a high one). :class:`PriorityVictimRefundsTwice` gives its tokens back to the budget
  twice (a stale budget);
- a full prefix hit on an exact page multiple (vLLM must recompute the last token):
  :class:`~.engine.TokenFromNothing`, which the zoo also checks as a fixed log, takes every page
  of such a prompt from the cache;
- a priority victim removed behind the running loop's cursor (vLLM): the loop walks the batch
  by index, so removing a request before the cursor shifts the next one under it and
  :class:`VictimBehindTheCursor` skips it with budget to spare;
- an admission at exactly zero free pages (vLLM's cached blocks counted as free):
  :class:`RevivedHitsCountedFree` counts a hit on a freed, cached page both as supply and as
  reduced demand (TensorRT-LLM's over-admission), so an admission at the pool's last free pages
  runs out mid-allocation.

Each class has a correct twin, its design without the bug (:data:`TWINS`), which the zoo's tests
check clean, so a catch is the bug's and not the design's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kvsched.checks.mutants.engine import V1, TokenFromNothing, engine_log
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine_scheduler import VLLM_V1, EngineConfig
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq, Status
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload

PRIORITY = replace(
    VLLM_V1, order="priority", victim="priority", token_budget=8, name="vllm-v1-priority"
)
"""vLLM v1 with ``--scheduling-policy priority``: the queue and the victim by priority. A budget
small enough that a crowd of prompts fills it, so a refund that was not owed shows."""


CURSOR = Workload(  # r1 runs ahead of two that outrank it; r3's page preempts it from behind
    "victim-behind-the-cursor",
    Limits(batch_limit=4, page_size=2, pool_pages=8),
    (
        Request("r1", 0, 2, 6, priority=3),
        Request("r3", 2, 2, 3, priority=2),
        Request("r4", 1, 5, 3, priority=2),
    ),
)


class PriorityV1(V1):
    """The correct priority design: the twin of the priority mutants."""

    config: EngineConfig = PRIORITY
    properties: TargetProperties = PRIORITY.properties()


class PriorityVictimRefundsTwice(PriorityV1):
    """Preempting a victim scheduled earlier in this ``schedule()`` refunds its tokens to the
    budget twice, so the batch computes more tokens than the budget allows."""

    def _preempt(self, step: Step, seq: Seq) -> None:
        step.budget += step.computed.get(seq.id, 0)  # the bug: _preempt refunds it as well
        super()._preempt(step, seq)


class VictimBehindTheCursor(PriorityV1):
    """The batch walked by index over the live list: a victim removed before the cursor, or the
    request itself, moves the next request under the cursor, which then steps past it."""

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        batch, cursor = list(seqs), 0
        while cursor < len(batch):
            super()._run(step, batch[cursor : cursor + 1])
            batch = [seq for seq in batch if seq.status is Status.RUNNING]
            cursor += 1  # the bug: not moved back for a request removed at or before it


class RevivedHitsCountedFree(V1):
    """Admission counts a hit on a freed, cached page twice: as a free page (supply) and as a
    page it need not allocate (less demand). Taking the page back empties the free queue by one
    more than admission weighed, so an admission that needed every free page runs out mid-way."""

    _revived = 0

    def _hits(self, seq: Seq) -> list[int]:
        hits = super()._hits(seq)
        self._revived = sum(1 for page in hits if page not in self.blocks.ref)
        return hits

    def _admit(self, step: Step) -> None:
        weigh = self.blocks.can_allocate

        def ignoring_revived(count: int, keep_free: int = 0) -> bool:
            revived, self._revived = self._revived, 0
            return weigh(count - revived, keep_free)  # the bug: the revived pages cost nothing

        self.blocks.can_allocate = ignoring_revived  # type: ignore[method-assign]
        try:
            super()._admit(step)
        finally:
            del self.blocks.can_allocate


TWINS: dict[type[V1], type[V1]] = {
    PriorityVictimRefundsTwice: PriorityV1,
    VictimBehindTheCursor: PriorityV1,
    TokenFromNothing: V1,
    RevivedHitsCountedFree: V1,
}
"""Each mutant's correct design, which must check clean."""


MUTANTS: tuple[Mutant, ...] = (
    Mutant("engine: victim behind the cursor", "a priority victim removed behind the running "
           "loop's cursor skips the request after it", "BATCH-6",
           write=engine_log(VictimBehindTheCursor, CURSOR)),
    Mutant("priority victim refunded twice", "a priority victim scheduled earlier in the step "
           "gives its tokens back to the budget twice", "BATCH-1",
           f"{__name__}:PriorityVictimRefundsTwice"),
    Mutant("full hit on a page multiple", "a prompt of whole pages, all cached, is taken from the "
           "cache whole: a token from nothing computed", "DEC-3",
           f"{TokenFromNothing.__module__}:TokenFromNothing"),
    Mutant("revived hit counted free", "a hit on a freed, cached page counted as free and as not "
           "needed: admission at the last free pages overruns the pool", "PROTO-1",
           f"{__name__}:RevivedHitsCountedFree"),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`): classes the search must draw a workload
for (checks/search/corners.py)."""
