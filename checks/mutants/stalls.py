"""Planted bugs that stall an engine without breaking a page or a token, recorded as event logs.

Each mutant is a design of reference/engine_scheduler/ with one behaviour of a real engine's
reported bug put in, declaring what the correct design declares; ``buggy=False`` records the same
run of the correct design, the control the zoo's tests check clean (:func:`.engine.engine_log`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvsched.checks.mutants.engine import V1, engine_log
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine_scheduler import BlockManager, EngineConfig
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq
from kvsched.spec.protocol import ModelOutput, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload


class _FencedBlocks(BlockManager):
    """A pool that, while ``fencing``, keeps what is released out of the free queue until
    :meth:`unfence`: the pages of a request whose last step may still be in flight."""

    def __init__(self, size: int, null_page: bool = False) -> None:
        super().__init__(size, null_page)
        self.fencing = False
        self.fenced: list[int] = []

    def release(self, pages: Sequence[int]) -> None:
        if self.fencing:
            self.fenced += pages  # still referenced: not free, not allocatable
            return
        super().release(pages)

    def unfence(self) -> None:
        fenced, self.fenced = self.fenced, []
        super().release(fenced)


DEFERRING = EngineConfig(token_budget=16, prefix_caching=False, name="vllm-v1-deferring")


class DefersPreemptedFrees(V1):
    """vLLM #49674: with deferred frees, a preempted victim's pages stay fenced until the step
    in flight is processed, yet the running loop preempts as if each victim made room at once.
    So it finds no more free pages after each victim and preempts down the running queue to the
    request that started it: an iteration that preempts everyone and computes nothing. The log
    reports every page as the victim's release (the pages are the victim's no more), and the
    pool takes them back by the end of the iteration, so its free count adds up (PAGE-3)."""

    config = DEFERRING
    properties = DEFERRING.properties()

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks: _FencedBlocks = _FencedBlocks(limits.pool_pages, self.config.null_page)

    def _preempt(self, step: Step, seq: Seq) -> None:
        self.blocks.fencing = True  # the bug: the victim's pages come back only after the step
        try:
            super()._preempt(step, seq)
        finally:
            self.blocks.fencing = False

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        self.blocks.unfence()  # the step is processed: the fence lifts
        return super().update_from_output(output)


WHOLE_PROMPTS = EngineConfig(
    token_budget=64, chunking="none", prefix_caching=False, name="vllm-v1-whole-prompts"
)


class KeepsInfeasibleAtHead(V1):
    """vLLM #39734: a request larger than the whole pool (within the model's length) is never
    recognised as one no scheduler can hold. It waits at the head of the queue, its allocation
    retried and refused every step, and under fcfs every request behind it waits forever."""

    config = WHOLE_PROMPTS
    properties = WHOLE_PROMPTS.properties()

    def _infeasible(self, seq: Seq) -> bool:
        return False  # the bug: the pool's size is never compared with the request's peak


BIG_FIRST = Workload(  # 'big' needs 7 pages of the 5 usable, and arrives ahead of 'small'
    "big-first",
    Limits(batch_limit=2, page_size=4, pool_pages=6),
    (Request("big", 0, 24, 2), Request("small", 0, 4, 2)),
    allow_infeasible=True,
)


THREE_DECODES = Workload(  # three requests grow into a full pool together and need a page at once
    "three-decodes",
    Limits(batch_limit=3, page_size=2, pool_pages=7),
    (Request("a", 0, 2, 6), Request("b", 0, 2, 6), Request("c", 0, 2, 6)),
)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("engine: deferred frees", "preempted pages come back only after the step: a cascade",
           "LIVE-4", write=engine_log(DefersPreemptedFrees, THREE_DECODES)),
    Mutant("engine: infeasible at the head", "a request larger than the pool blocks the queue",
           "LIVE-5", write=engine_log(KeepsInfeasibleAtHead, BIG_FIRST)),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
