"""Planted prefix-reuse bugs of the engine scheduler, each reported against a real engine.

- a hit credited when the batch is scheduled, and evicted before the request is given its pages
  (an engine that decides the batch first and provisions it after): an earlier admission's
  fresh pages take the least recently freed pages, which are the later request's hit, so the
  later request computes again what the budget counted as cached.
  :class:`HitEvictedBeforeProvisioned` runs the whole uncached part, over the token budget
  (BATCH-1);
- a prefix match that ends inside a page, served without copy-on-write: the requester is handed
  the donor's partly shared last page by reference, and writes its own tokens into it over the
  donor's. :class:`SharesPartialTail` takes that page as a hit (PAGE-6: the page holds the
  donor's tokens, not the requester's).

Neither shows on a fixed workload of the zoo's: the search must draw a shared prefix that ends
inside a page (:func:`.search.corners.shared_prefixes`), or a hit on freed pages at the front
of the free queue, behind another admission in the same step. Each has the correct design as its
twin (:data:`TWINS`), which the zoo's tests check clean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvsched.checks.mutants.engine import V1
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine_scheduler import VLLM_V1, EngineConfig
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits

TIGHT_BUDGET = replace(VLLM_V1, token_budget=8, name="vllm-v1-budget-8")
"""vLLM v1 with ``--max-num-batched-tokens 8``: a budget a few prompts fill, so tokens computed
past it show."""


class TightBudgetV1(V1):
    """The correct design under :data:`TIGHT_BUDGET`: the twin of the provisioning mutant."""

    config: EngineConfig = TIGHT_BUDGET
    properties: TargetProperties = TIGHT_BUDGET.properties()


class HitEvictedBeforeProvisioned(TightBudgetV1):
    """Admission weighs each request with the hits it finds when the batch is decided, but the
    pages are provisioned after every admission is decided, in order: a hit on a freed page that
    an earlier admission's fresh pages took meanwhile is gone, and the request computes those
    tokens too, past the budget that counted them cached."""

    def _admit(self, step: Step) -> None:
        blocks, pending = self.blocks, [0]
        share, allocate, weigh = blocks.share, blocks.allocate, blocks.can_allocate
        planned: dict[str, tuple[list[int], int]] = {}

        def deciding(count: int, keep_free: int = 0) -> bool:
            return weigh(count + pending[0], keep_free)

        def noting(pages: Sequence[int]) -> None:
            planned[self._deciding.id] = (list(pages), 0)
            pending[0] += sum(1 for page in pages if page not in blocks.ref)

        def deferring(count: int) -> list[int]:
            hits, _ = planned.get(self._deciding.id, ([], 0))
            planned[self._deciding.id] = (hits, count)
            pending[0] += count
            return []

        blocks.can_allocate, blocks.share, blocks.allocate = (  # type: ignore[method-assign]
            deciding,
            noting,
            deferring,
        )
        try:
            super()._admit(step)
        finally:
            del blocks.can_allocate, blocks.share, blocks.allocate
        size = self.limits.page_size
        for rid in step.admitted:  # provisioned in admission order, once all are decided
            seq = self.seqs[rid]
            hits, fresh = planned.pop(rid, ([], 0))
            kept = blocks.lookup(self._chain(seq, len(hits)))  # what is still cached now
            share(kept)
            seq.table = kept + allocate(fresh + len(hits) - len(kept))
            lost = (len(hits) - len(kept)) * size
            if lost:  # the bug: the evicted tokens are computed as well, over the budget
                seq.computed -= lost
                seq.registered = len(kept)
                step.computed[rid] += lost
                step.budget -= lost
                if kept:
                    step.cached[rid] = len(kept) * size
                    step.shared[rid] = tuple(kept)
                else:
                    step.cached.pop(rid, None)
                    step.shared.pop(rid, None)

    _deciding: Seq

    def _hits(self, seq: Seq) -> list[int]:
        self._deciding = seq  # the request admission is weighing, for the deferred pages
        return super()._hits(seq)


class SharesPartialTail(V1):
    """A prefix that ends inside a page is matched to its last token: the requester takes the
    page of a running member of its group that holds that end by reference, without copying
    it, and computes the rest of its prompt into it, over that member's own tokens."""

    def __init__(self, limits: Limits, config: EngineConfig | None = None) -> None:
        super().__init__(limits, config)
        self._tail_taken: dict[str, tuple[int, int]] = {}
        """The requests given a partial page this ``schedule()``: the page, and where their
        match ends."""

    def _hits(self, seq: Seq) -> list[int]:
        hits = super()._hits(seq)
        request, size = seq.request, self.limits.page_size
        if not request.prefix_group:
            return hits
        for donor in self.running:
            if donor.request.prefix_group != request.prefix_group:
                continue
            common = min(request.prefix_tokens, donor.request.prefix_tokens)
            index = common // size
            if not common % size or len(hits) != index or donor.computed < common:
                continue
            if index >= len(donor.table) or (index + 1) * size >= seq.tokens:
                continue
            tail = donor.table[index]  # the bug: the match inside a page shares that page
            self._tail_taken[seq.id] = (tail, common)
            return [*hits, tail]
        return hits

    def _admit(self, step: Step) -> None:
        blocks = self.blocks
        share = blocks.share

        def sharing_tails(pages: Sequence[int]) -> None:
            tails = {tail for tail, _ in self._tail_taken.values()}
            share([page for page in pages if page not in tails])
            for page in pages:
                if page in tails:
                    blocks.ref[page] += 1

        blocks.share = sharing_tails  # type: ignore[method-assign]
        try:
            super()._admit(step)
        finally:
            del blocks.share
        size = self.limits.page_size
        for rid, (_, common) in self._tail_taken.items():
            if rid not in step.admitted:
                continue
            seq = self.seqs[rid]
            over = len(step.shared[rid]) * size - common
            seq.computed -= over  # the hit ends where the prefix does, inside the tail page
            seq.registered -= 1
            step.cached[rid] -= over
            step.computed[rid] += over
            step.budget -= over
        self._tail_taken.clear()


TWINS: dict[type[V1], type[V1]] = {
    HitEvictedBeforeProvisioned: TightBudgetV1,
    SharesPartialTail: V1,
}
"""Each mutant's correct design, which must check clean."""


MUTANTS: tuple[Mutant, ...] = (
    Mutant("hit evicted before provisioned", "a hit credited when the batch is decided is evicted "
           "by an earlier admission's fresh pages before the request gets its own", "BATCH-1",
           f"{__name__}:HitEvictedBeforeProvisioned"),
    Mutant("partial tail shared", "a prefix match ending inside a page shares the donor's page "
           "without copy-on-write", "PAGE-6", f"{__name__}:SharesPartialTail"),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`): classes the search must draw a workload
for (checks/search/corners.py)."""
