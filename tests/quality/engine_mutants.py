"""Planted bugs in the reference engine scheduler, one per feature, each with the id that must
catch it. Each is the vLLM v1 design (reference/engine_scheduler/config.py) with one method
broken, and declares what the correct design declares.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvsched.reference.engine_scheduler import VLLM_V1, BlockManager, EngineConfig, EngineScheduler
from kvsched.reference.engine_scheduler.scheduler import Seq, Step
from kvsched.reference.pool import PoolError
from kvsched.spec.workload import Limits

V1 = EngineScheduler.configured(VLLM_V1)


class _ForgetsReferences(BlockManager):
    def release(self, pages: list[int]) -> None:  # type: ignore[override]
        for page in reversed(pages):
            if page not in self.ref:
                raise PoolError(f"double free: page {page} is not held")
            del self.ref[page]  # the bug: every reference at once
            self._free[page] = None


class FreesSharedPage(V1):  # type: ignore[misc,valid-type]
    """A shared page is freed when its first holder finishes, while others still read it."""

    expected = "PAGE-3"

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks = _ForgetsReferences(limits.pool_pages, self.config.null_page)


class _KeepsHashes(BlockManager):
    def allocate(self, count: int) -> list[int]:
        pages = []
        for _ in range(count):
            page, _ = self._free.popitem(last=False)
            self.ref[page] = 1  # the bug: the page's old hash stays in the cache
            pages.append(page)
        return pages


class HitsEvictedPage(V1):  # type: ignore[misc,valid-type]
    """A page reused for new content is still found under its old prefix's hash."""

    expected = "PAGE-6"

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks = _KeepsHashes(limits.pool_pages, self.config.null_page)


class PreemptedKeepsPage(V1):  # type: ignore[misc,valid-type]
    """Preemption releases every page but the last, which stays in limbo."""

    expected = "PAGE-4"

    def _preempt(self, step: Step, seq: Seq) -> None:
        seq.table = seq.table[:-1]  # the bug: the last page is neither released nor reported
        super()._preempt(step, seq)


class TokenFromNothing(V1):  # type: ignore[misc,valid-type]
    """A full prefix-cache hit leaves nothing to compute, yet a token is sampled."""

    expected = "DEC-3"

    def _hits(self, seq: Seq) -> list[int]:
        full = seq.tokens // self.limits.page_size  # the bug: no "tokens - 1" cap
        return self.blocks.lookup(self.blocks.chain(self._keys(seq, full)))


class WritesPastTable(V1):  # type: ignore[misc,valid-type]
    """The pages for a chunk are counted with a floor: KV written past the table."""

    expected = "PAGE-1"

    def _run(self, step: Step, seqs: object) -> None:
        for seq in list(self.running):
            count = min(seq.tokens - seq.computed, step.budget)
            if count <= 0:
                continue
            needed = (seq.computed + count) // self.limits.page_size - len(seq.table)
            if needed > 0 and self.blocks.can_allocate(needed):
                seq.table += self.blocks.allocate(needed)
            step.computed[seq.id] = count
            step.budget -= count


SMALL_BUDGET = EngineConfig(token_budget=4, prefix_caching=False, name="vllm-v1")


class PreemptsOnLowPool(EngineScheduler.configured(SMALL_BUDGET)):  # type: ignore[misc]
    """A watermark meant for admission is applied to running requests: with fewer than two
    free pages the last running request is preempted, even though its next chunk fits. A long
    prompt is then preempted whenever its recompute comes back to where it was (thrash)."""

    expected = "LIVE-3"

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        while self.running and self.blocks.free_count < 2:
            self._preempt(step, self.running[-1])
        super()._run(step, self.running)


NANO_NONE = EngineConfig(
    token_budget=8, chunking="none", batching="prefill-first", null_page=False, name="nano"
)


class ChunksDespiteDeclaringNone(EngineScheduler.configured(NANO_NONE)):  # type: ignore[misc]
    """Declares nano-vllm's classic whole-prompt admission but chunks a prompt over the budget."""

    expected = "BATCH-5"

    def _may_chunk(self, step: Step) -> bool:
        return True


ENGINE_MUTANTS = (
    FreesSharedPage,
    HitsEvictedPage,
    PreemptedKeepsPage,
    TokenFromNothing,
    WritesPastTable,
    PreemptsOnLowPool,
    ChunksDespiteDeclaringNone,
)
