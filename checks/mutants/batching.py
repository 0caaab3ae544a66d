"""Broken scheduling: schedulers that decode, admit, finish or batch against the rules.

Each plants one bug in a reference scheduler with as small a change as the bug needs; the zoo
(:mod:`.zoo`) says which invariant ``kvsched check`` must report for each.
"""

from __future__ import annotations

from dataclasses import replace

from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.static import StaticScheduler
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, peak_pages


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


class SkipsABlockedHead(ContinuousScheduler):
    """First fit instead of FCFS: when the head of the queue does not fit the pool, the first
    request behind it that does is admitted ahead of it."""

    def schedule(self) -> ScheduledBatch:
        if self.admission_open() and self.waiting and not self.can_admit(self.waiting[0]):
            fits = next((r for r in self.waiting if self.can_admit(r)), None)
            if fits is not None:
                self.waiting.remove(fits)
                self.waiting.appendleft(fits)  # BUG: overtakes the head
        return super().schedule()


class StarvesAFullPoolRequest(StaticScheduler):
    """Admission compares with ``<`` instead of ``<=``: a request whose peak pages fill the whole
    pool never fits, and everyone behind it waits forever (vLLM #39734's class)."""

    def can_admit(self, request: Request) -> bool:
        return (
            len(self.running) < self.limits.batch_limit
            and self.committed_pages + peak_pages(request, self.limits.page_size)
            < self.limits.pool_pages  # BUG: < instead of <=
        )


# Shared by the test files ---------------------------------------------------------------------
# Each breaks its rule on the smallest workload that can show it (one output token per request,
# pages of one token): what the search tests assert their counterexamples shrink to.
# IgnoresBatchLimit is also the zoo's BATCH-1 mutant; DecodesTwice is not in the zoo.


class DecodesTwice(ContinuousScheduler):
    """The oldest member is scheduled twice in every iteration, room or not (DEC-1)."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        return replace(batch, decode=batch.decode + batch.decode[:1])  # BUG


class IgnoresBatchLimit(ContinuousScheduler):
    """Admits whatever fits the pool, however many are active (BATCH-1)."""

    def can_admit(self, request: Request) -> bool:
        peak = peak_pages(request, self.limits.page_size)
        return self.committed_pages + peak <= self.limits.pool_pages  # BUG: slots not counted


MUTANTS: tuple[Mutant, ...] = (
    Mutant("two tokens", "a request decodes twice in one iteration", "DEC-1",
           f"{__name__}:TwoTokensInOneIteration"),
    Mutant("token for a waiting request", "the queue's head decodes before admission", "DEC-2",
           f"{__name__}:TokenForWaitingRequest"),
    Mutant("dropped request", "a request is freed and forgotten without finishing", "REQ-2",
           f"{__name__}:DropsARequest"),
    Mutant("finished twice", "finished requests are reported finished again", "REQ-2",
           f"{__name__}:FinishesTwice"),
    Mutant("static admits mid-batch", "static batching refills a slot before the drain",
           "BATCH-2", f"{__name__}:StaticAdmitsMidBatch"),
    Mutant("continuous idles", "a freed slot is refilled one iteration late", "BATCH-3",
           f"{__name__}:ContinuousIdlesAfterFinish"),
    Mutant("head skipped", "first fit: a request overtakes a head that does not fit", "BATCH-4",
           f"{__name__}:SkipsABlockedHead"),
    Mutant("starvation", "a request needing the whole pool never fits (< for <=)", "LIVE-2",
           f"{__name__}:StarvesAFullPoolRequest"),
    Mutant("batch overflow", "admission counts pages but not slots", "BATCH-1",
           f"{__name__}:IgnoresBatchLimit"),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
