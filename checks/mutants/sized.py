"""Bugs that show only at sizes the lesson's trace never reaches.

A leak that needs five requests active at once and a hang that needs more than five waiting pass
every check that draws a handful of requests; real batches hold 32 to 256. These mutants hold the
search to real sizes (checks/search/strategies.py, ``search_workloads``). The third size-only bug,
an allocator that is wrong only above 2**53, is a learner's file (``learner/buggy_float_ceil.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.pool import PagePool
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits

CROWD = 5
"""How many requests it takes: active ones for the leak, more than this waiting for the hang."""


class LeakInACrowd(ContinuousScheduler):
    """A request that finishes while ``CROWD`` or more are active never gives its pages back."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _CrowdLeakyPool(limits.pool_pages)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        assert isinstance(self.pool, _CrowdLeakyPool)
        self.pool.crowded = len(self.running) >= CROWD
        return super().update_from_output(output)


class _CrowdLeakyPool(PagePool):
    crowded = False

    def free(self, owner: str, pages: Sequence[int]) -> None:
        if not self.crowded:
            super().free(owner, pages)
            return
        for page in pages:
            del self._owner[page]  # BUG: never back on the free queue


class HangsOnALongQueue(ContinuousScheduler):
    """``schedule()`` loops forever once more than ``CROWD`` requests wait."""

    def schedule(self) -> ScheduledBatch:
        while len(self.waiting) > CROWD:  # BUG: never exits
            pass
        return super().schedule()


MUTANTS: tuple[Mutant, ...] = (
    Mutant("leak in a crowd", "pages leak only once 5 or more requests are active", "PAGE-3",
           f"{__name__}:LeakInACrowd"),
    Mutant("hang on a long queue", "schedule() loops forever once more than 5 requests wait",
           "PROTO-1", f"{__name__}:HangsOnALongQueue", timeout=1.0),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`): nothing the teaching trace or a handful
of requests reaches."""
