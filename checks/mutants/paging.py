"""Broken page handling: schedulers and allocators that round, share, leak or overcommit pages.

Each plants one bug in the reference scheduler with as small a change as the bug needs; the zoo
(:mod:`.zoo`) says which invariant ``kvsched check`` must report for each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference import scheduler
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.pool import PagePool
from kvsched.spec.protocol import ModelOutput, StepOutcome
from kvsched.spec.workload import Limits, Request


class OffByOneRounding(ContinuousScheduler):
    """Pages as ``tokens // page_size + 1``: a page too many whenever tokens fill their pages."""

    def _grow(self, seq: scheduler.Sequence) -> None:
        held = seq.request.prompt_tokens + seq.generated + 1
        missing = held // self.limits.page_size + 1 - len(seq.pages)  # BUG: not ceil
        if missing > 0:
            seq.pages += tuple(self.pool.allocate(seq.request.id, missing))


class PageInTwoTables(ContinuousScheduler):
    """A newcomer's first page is the oldest member's first page: one page, two owners."""

    def _grow(self, seq: scheduler.Sequence) -> None:
        oldest = self.running[0]
        if not seq.pages and oldest is not seq and oldest.pages:
            seq.pages += (oldest.pages[0],)  # BUG: not taken from the pool
        super()._grow(seq)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        # The pool never gave out the shared page, so each owner frees only what it took.
        taken = {seq.request.id: list(seq.pages) for seq in self.running}
        for seq in self.running:
            seq.pages = tuple(p for p in seq.pages if self.pool._owner.get(p) == seq.request.id)
        outcome = super().update_from_output(output)
        freed = {rid: tuple(taken[rid]) for rid in outcome.finished}
        return replace(outcome, freed=freed)


class LeakOnFinish(ContinuousScheduler):
    """A finished request's pages are reported freed but never go back to the pool."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _LeakyPool(limits.pool_pages)


class _LeakyPool(PagePool):
    def free(self, owner: str, pages: Sequence[int]) -> None:
        for page in pages:
            del self._owner[page]  # BUG: never appended to the free queue


class ReuseBeforeFree(ContinuousScheduler):
    """Use after free: a request's pages go back to the pool (to its front) at the start of its
    last iteration, while it still writes its last token into them (vLLM #45357's class)."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _EarlyPool(limits.pool_pages)

    def _grow(self, seq: scheduler.Sequence) -> None:
        super()._grow(seq)
        assert isinstance(self.pool, _EarlyPool)
        if seq.generated + 1 == seq.request.output_tokens:
            self.pool.release_early(seq.request.id, seq.pages)  # BUG: still in use


class _EarlyPool(PagePool):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.released: dict[str, set[int]] = {}

    def release_early(self, owner: str, pages: Sequence[int]) -> None:
        mine = [p for p in pages if self._owner.get(p) == owner]
        super().free(owner, mine)
        for page in reversed(mine):  # most recently freed first, as a LIFO allocator would
            self._free.remove(page)
            self._free.appendleft(page)
        self.released.setdefault(owner, set()).update(mine)

    def free(self, owner: str, pages: Sequence[int]) -> None:
        early = self.released.pop(owner, set())
        super().free(owner, [p for p in pages if p not in early])


class KeepsPagesOnFinish(ContinuousScheduler):
    """A finished request leaves the batch without freeing its pages: they stay allocated to it
    and the outcome frees nothing (vLLM #46283's class)."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _NeverFreePool(limits.pool_pages)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        return replace(outcome, freed={})  # BUG: finished, yet still holding its pages


class _NeverFreePool(PagePool):
    def free(self, owner: str, pages: Sequence[int]) -> None:
        pass  # the pages stay the finished request's


class OvercommitsThePool(ContinuousScheduler):
    """Admission counts only slots, not pages; the allocator hands out page ids past the pool
    when it runs dry instead of refusing."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _BottomlessPool(limits.pool_pages)

    def can_admit(self, request: Request) -> bool:
        return len(self.running) < self.limits.batch_limit  # BUG: pages not counted


class _BottomlessPool(PagePool):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self._next_extra = size

    def can_allocate(self, count: int) -> bool:
        return count >= 0

    def allocate(self, owner: str, count: int) -> list[int]:
        from_pool = min(count, self.free_count)
        pages = super().allocate(owner, from_pool)
        for _ in range(count - from_pool):
            pages.append(self._next_extra)
            self._owner[self._next_extra] = owner
            self._next_extra += 1
        return pages

    def free(self, owner: str, pages: Sequence[int]) -> None:
        super().free(owner, [p for p in pages if p < self.size])
        for page in pages:
            self._owner.pop(page, None)


# Shared by the test files, not in the zoo -----------------------------------------------------
# Each breaks its rule on the smallest workload that can show it (one output token per request,
# pages of one token): what the search tests assert their counterexamples shrink to.


class NeverReturnsPages(ContinuousScheduler):
    """Reports a finished request's pages freed but keeps as many out of the pool (PAGE-3)."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        for pages in outcome.freed.values():
            self.pool.allocate("<lost>", len(pages))  # BUG
        return replace(outcome, free_pages=self.pool.free_count)


MUTANTS: tuple[Mutant, ...] = (
    Mutant("off-by-one rounding", "pages = tokens // page_size + 1", "PAGE-1",
           f"{__name__}:OffByOneRounding"),
    Mutant("page in two tables", "a newcomer's first page is another request's", "PAGE-2",
           f"{__name__}:PageInTwoTables"),
    Mutant("leak on finish", "freed pages never return to the pool", "PAGE-3",
           f"{__name__}:LeakOnFinish"),
    Mutant("keeps pages on finish", "a finished request never frees its pages", "PAGE-4",
           f"{__name__}:KeepsPagesOnFinish"),
    Mutant("reuse before free", "pages freed while the last token is written, and reused",
           "PAGE-2", f"{__name__}:ReuseBeforeFree"),
    Mutant("pool overcommit", "admission ignores pages; the allocator overflows", "PAGE-5",
           f"{__name__}:OvercommitsThePool"),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
