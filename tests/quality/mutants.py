"""The mutant zoo: reference schedulers with one deliberate bug each.

Every class here is a bug class reported against real engines (shared/prior-art.md, section 3)
or a classic mistake of the lesson's exercise, planted in the reference scheduler with as small a
change as the bug needs. ``zoo.py`` says which invariant ``kvsched check`` must report for each;
``kvsched mutants`` and ``test_mutant_zoo.py`` hold the checker to it. A mutant that went
uncaught, or was caught under the wrong id, would mean the checks are weaker than they claim.

These are targets, not tests: ``kvsched check tests/quality/mutants.py:TwoTokensInOneIteration``
judges one like any third-party scheduler. The test files import them (``from quality.mutants
import ...``) rather than plant the same bug again. The last section holds broken schedulers
that several test files share: the search tests need bugs that show on the smallest workload.
``zoo.py`` lists one of them (``IgnoresBatchLimit``, for BATCH-1); for DEC-1 and PAGE-3 it
already has mutants above.
"""

from __future__ import annotations

from dataclasses import replace

from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.pool import PagePool
from kvsched.reference.scheduler import Sequence
from kvsched.reference.static import StaticScheduler
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, peak_pages


class OffByOneRounding(ContinuousScheduler):
    """Pages as ``tokens // page_size + 1``: a page too many whenever tokens fill their pages."""

    def _grow(self, seq: Sequence) -> None:
        held = seq.request.prompt_tokens + seq.generated + 1
        missing = held // self.limits.page_size + 1 - len(seq.pages)  # BUG: not ceil
        if missing > 0:
            seq.pages += tuple(self.pool.allocate(seq.request.id, missing))


class PageInTwoTables(ContinuousScheduler):
    """A newcomer's first page is the oldest member's first page: one page, two owners."""

    def _grow(self, seq: Sequence) -> None:
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
    def free(self, owner: str, pages: list[int]) -> None:
        for page in pages:
            del self._owner[page]  # BUG: never appended to the free queue


class ReuseBeforeFree(ContinuousScheduler):
    """Use after free: a request's pages go back to the pool (to its front) at the start of its
    last iteration, while it still writes its last token into them (vLLM #45357's class)."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _EarlyPool(limits.pool_pages)

    def _grow(self, seq: Sequence) -> None:
        super()._grow(seq)
        assert isinstance(self.pool, _EarlyPool)
        if seq.generated + 1 == seq.request.output_tokens:
            self.pool.release_early(seq.request.id, seq.pages)  # BUG: still in use


class _EarlyPool(PagePool):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.released: dict[str, set[int]] = {}

    def release_early(self, owner: str, pages: list[int]) -> None:
        mine = [p for p in pages if self._owner.get(p) == owner]
        super().free(owner, mine)
        for page in reversed(mine):  # most recently freed first, as a LIFO allocator would
            self._free.remove(page)
            self._free.appendleft(page)
        self.released.setdefault(owner, set()).update(mine)

    def free(self, owner: str, pages: list[int]) -> None:
        early = self.released.pop(owner, set())
        super().free(owner, [p for p in pages if p not in early])


class TwoTokensInOneIteration(ContinuousScheduler):
    """The oldest member is scheduled twice in an iteration whenever its pages have the room."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        for seq in self.running:
            room = len(seq.pages) * self.limits.page_size
            if seq.generated + 2 <= seq.request.output_tokens and (
                seq.request.prompt_tokens + seq.generated + 2 <= room
            ):
                return replace(batch, decode=(*batch.decode, seq.request.id))  # BUG
        return batch


class TokenForWaitingRequest(ContinuousScheduler):
    """The head of the waiting queue is put in the decode list though it was not admitted."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        if self.waiting:
            return replace(batch, decode=(*batch.decode, self.waiting[0].id))  # BUG
        return batch


class DropsARequest(ContinuousScheduler):
    """After one token, the second member of a batch is dropped: its pages are freed and it is
    forgotten, without ever finishing."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        victims = [s for s in self.running[1:2] if s.generated == 1]
        if not victims:
            return outcome
        victim = victims[0]
        self.running.remove(victim)  # BUG: neither finished nor kept
        self.pool.free(victim.request.id, victim.pages)
        self.committed_pages -= peak_pages(victim.request, self.limits.page_size)
        freed = {**outcome.freed, victim.request.id: tuple(victim.pages)}
        return replace(outcome, freed=freed, free_pages=self.pool.free_count)


class FinishesTwice(ContinuousScheduler):
    """Requests finished in one iteration are reported finished again in the next."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self._last: tuple[str, ...] = ()

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        again, self._last = self._last, outcome.finished
        return replace(outcome, finished=outcome.finished + again)  # BUG


class StaticAdmitsMidBatch(StaticScheduler):
    """Static batching that refills a finished member's slot before the batch drains."""

    def admission_open(self) -> bool:
        return len(self.running) < self.limits.batch_limit  # BUG: should wait for the drain


class ContinuousIdlesAfterFinish(ContinuousScheduler):
    """Continuous batching that refills a freed slot one iteration late: it idles while the head
    of the queue fits."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self._finished_last_iteration = False

    def admission_open(self) -> bool:
        return not self._finished_last_iteration  # BUG: closed right after a completion

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        self._finished_last_iteration = bool(outcome.finished)
        return outcome


class StarvesAFullPoolRequest(StaticScheduler):
    """Admission compares with ``<`` instead of ``<=``: a request whose peak pages fill the whole
    pool never fits, and everyone behind it waits forever (vLLM #39734's class)."""

    def can_admit(self, request: Request) -> bool:
        return (
            len(self.running) < self.limits.batch_limit
            and self.committed_pages + peak_pages(request, self.limits.page_size)
            < self.limits.pool_pages  # BUG: < instead of <=
        )


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

    def free(self, owner: str, pages: list[int]) -> None:
        super().free(owner, [p for p in pages if p < self.size])
        for page in pages:
            self._owner.pop(page, None)


class RaisesMidRun(ContinuousScheduler):
    """``schedule()`` raises once a third request has arrived."""

    def schedule(self) -> ScheduledBatch:
        if len(self.waiting) + len(self.running) >= 3:
            raise KeyError("slot table corrupted")  # BUG
        return super().schedule()


class AnswersGarbage(ContinuousScheduler):
    """``update_from_output()`` returns a dict instead of a StepOutcome."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        return {"finished": outcome.finished}  # type: ignore[return-value]  # BUG


class HangsInSchedule(ContinuousScheduler):
    """``schedule()`` loops forever once the batch is full."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        while len(self.running) >= self.limits.batch_limit > 1:  # BUG: never exits
            pass
        return batch


# Shared by the test files, not in the zoo ----------------------------------------------------
# Each breaks its rule on the smallest workload that can show it (one output token per request,
# pages of one token): what the search tests assert their counterexamples shrink to.


class DecodesTwice(ContinuousScheduler):
    """The oldest member is scheduled twice in every iteration, room or not (DEC-1)."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        return replace(batch, decode=batch.decode + batch.decode[:1])  # BUG


class NeverReturnsPages(ContinuousScheduler):
    """Reports a finished request's pages freed but keeps as many out of the pool (PAGE-3)."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        for pages in outcome.freed.values():
            self.pool.allocate("<lost>", len(pages))  # BUG
        return replace(outcome, free_pages=self.pool.free_count)


class IgnoresBatchLimit(ContinuousScheduler):
    """Admits whatever fits the pool, however many are active (BATCH-1)."""

    def can_admit(self, request: Request) -> bool:
        peak = peak_pages(request, self.limits.page_size)
        return self.committed_pages + peak <= self.limits.pool_pages  # BUG: slots not counted
