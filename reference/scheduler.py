"""The reference scheduler core shared by both policies (spec/semantics.md, sections 3 and 5).

One iteration, as section 3 orders it: admit from the head of the waiting queue while the policy
allows (3.2), grow every active request's page table to hold this iteration's token (3.3), decode
one token per active request (3.4), then finish and free (3.5). The policies differ only in when
admission is open: :mod:`.static` and :mod:`.continuous`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, pages_for, peak_pages

from .pool import PagePool


@dataclass
class Sequence:
    """A request as the scheduler tracks it: tokens generated so far and pages held."""

    request: Request
    generated: int = 0
    pages: tuple[int, ...] = ()

    @property
    def done(self) -> bool:
        return self.generated >= self.request.output_tokens


class ReferenceScheduler:
    """FCFS admission with peak-page commitment; subclasses say when admission is open."""

    policy = "abstract"

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.pool = PagePool(limits.pool_pages)
        self.waiting: deque[Request] = deque()
        self.running: list[Sequence] = []
        # Pages the running requests will hold at their peak (section 3.2); admission keeps this
        # within the pool, so growth in 3.3 can never run out and no request is ever preempted.
        self.committed_pages = 0

    def admission_open(self) -> bool:
        """Whether this policy admits in the coming iteration (section 5)."""
        raise NotImplementedError

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def can_admit(self, request: Request) -> bool:
        """A slot is free and the request's peak pages fit beside the batch's (BATCH-1, PAGE-5)."""
        return (
            len(self.running) < self.limits.batch_limit
            and self.committed_pages + peak_pages(request, self.limits.page_size)
            <= self.limits.pool_pages
        )

    def schedule(self) -> ScheduledBatch:
        admitted: list[str] = []
        if self.admission_open():
            # Strict FCFS: stop at the first request that does not fit (BATCH-4).
            while self.waiting and self.can_admit(self.waiting[0]):
                request = self.waiting.popleft()
                self.running.append(Sequence(request))
                self.committed_pages += peak_pages(request, self.limits.page_size)
                admitted.append(request.id)
        for seq in self.running:
            self._grow(seq)
        return ScheduledBatch(
            admitted=tuple(admitted),
            # every active request, once, and nobody else; each computes the KV of the token
            # it produces in this same iteration (DEC-1, DEC-2, DEC-3)
            decode=tuple(seq.request.id for seq in self.running),
            page_tables={seq.request.id: seq.pages for seq in self.running},
        )

    def _grow(self, seq: Sequence) -> None:
        """Take the pages this iteration's token needs, and no more (PAGE-1)."""
        held_after_decode = seq.request.prompt_tokens + seq.generated + 1
        missing = pages_for(held_after_decode, self.limits.page_size) - len(seq.pages)
        if missing > 0:
            seq.pages += tuple(self.pool.allocate(seq.request.id, missing))

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        finished: list[str] = []
        freed: dict[str, tuple[int, ...]] = {}
        still_running: list[Sequence] = []
        for seq in self.running:
            seq.generated += output.tokens.get(seq.request.id, 0)
            if not seq.done:
                still_running.append(seq)
                continue
            # Done after exactly output_tokens tokens; it leaves running, so finishes once (REQ-2).
            # A finished request releases every page at once (PAGE-4).
            self.pool.free(seq.request.id, seq.pages)
            self.committed_pages -= peak_pages(seq.request, self.limits.page_size)
            finished.append(seq.request.id)
            freed[seq.request.id] = seq.pages
            seq.pages = ()
        self.running = still_running
        return StepOutcome(finished=tuple(finished), freed=freed, free_pages=self.pool.free_count)
