"""An asynchronous engine's planted bug: pages given back while a step is in flight (PAGE-7).

vLLM's ``AsyncScheduler`` schedules step ``n + 1`` before step ``n``'s output is processed, so a
request found finished, aborted or preempted may still be written by the step in flight. vLLM
#45357 fences its blocks until that step is processed; before the fix they went back to the pool
at once and could be handed to another request while the stale write was still coming.

Both designs below are reference/engine_scheduler/'s vLLM v1 declaring ``async_scheduling``, with
the prefix cache off (a hit on a fenced page is the rule's too, and a fence that lets one through
would be a second bug). :class:`ReusesInFlightPages` gives pages back at once, as a synchronous
engine does: caught with PAGE-7. :class:`FencesInFlightPages`, its clean twin, fences every page
it gives back until the end of the update after the free: a preemption's pages until the end of
its own iteration, a finish's until the end of the next one. It counts fenced pages as free (held
by no request, PAGE-3), as the monitor does, and leaves them out of what it allocates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from kvsched.checks.mutants.engine import V1, engine_log
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine_scheduler import BlockManager, EngineConfig
from kvsched.spec.protocol import ModelOutput, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload

ASYNC = EngineConfig(token_budget=16, prefix_caching=False, name="vllm-v1-async")


class ReusesInFlightPages(V1):
    """vLLM before #45357: declares asynchronous scheduling, yet a finished request's pages go
    back to the pool at once, and the next iteration hands them out while the step in flight
    may still write them."""

    config = ASYNC
    properties = replace(ASYNC.properties(), async_scheduling=True)


class _StepFence(BlockManager):
    """A pool whose released pages wait in a fence until :meth:`lift`."""

    def __init__(self, size: int, null_page: bool = False) -> None:
        super().__init__(size, null_page)
        self.fenced: list[Sequence[int]] = []

    def release(self, pages: Sequence[int]) -> None:
        self.fenced.append(tuple(pages))  # still referenced: not allocatable yet

    def lift(self, fenced: list[Sequence[int]]) -> None:
        for pages in fenced:
            super().release(pages)

    @property
    def free_count(self) -> int:
        """Free pages, fenced ones included: no request holds them (PAGE-3)."""
        waiting = Counter(page for pages in self.fenced for page in pages)
        fenced = sum(1 for page, count in waiting.items() if self.ref.get(page, 0) == count)
        return super().free_count + fenced


class FencesInFlightPages(ReusesInFlightPages):
    """The fix: every page given back waits for the step in flight to be processed."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks: _StepFence = _StepFence(limits.pool_pages, self.config.null_page)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        # What the schedule and the update before this one gave back is free once this
        # update has processed the step; what this update gives back waits for the next.
        pending, self.blocks.fenced = self.blocks.fenced, []
        outcome = super().update_from_output(output)
        self.blocks.lift(pending)
        return replace(outcome, free_pages=self.blocks.free_count)


TURNOVER = Workload(  # a short request finishes while others wait for its pages
    "turnover",
    Limits(batch_limit=2, page_size=2, pool_pages=5),
    (Request("a", 0, 2, 1), Request("b", 0, 4, 3), Request("c", 0, 2, 2), Request("d", 1, 2, 2)),
)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("engine: reuses in-flight pages", "async: a finished request's pages handed out at once",
           "PAGE-7", write=engine_log(ReusesInFlightPages, TURNOVER, twin=FencesInFlightPages)),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
