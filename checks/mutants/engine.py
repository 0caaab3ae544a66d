"""Planted bugs in the reference engine scheduler, one per engine feature, recorded as event logs.

Each mutant is a design of reference/engine_scheduler/ with one method broken, declaring what the
correct design declares. The zoo checks the log of a small run that shows the bug, on a workload
chosen for it (a shared prefix, a pool that forces preemption); ``buggy=False`` records the same
run of the correct design, the control the zoo's tests check clean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from kvsched.checks.eventlog.jsonl import write_log
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import VLLM_V1, BlockManager, EngineConfig, EngineScheduler
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq
from kvsched.reference.pool import PoolError
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload, pages_for


class V1(EngineScheduler):
    """The correct vLLM v1 design, declaring itself."""

    config: EngineConfig = VLLM_V1
    properties: TargetProperties = VLLM_V1.properties()


class _ForgetsReferences(BlockManager):
    def release(self, pages: Iterable[int]) -> None:
        for page in reversed(list(pages)):
            if page not in self.ref:
                raise PoolError(f"double free: page {page} is not held")
            del self.ref[page]  # the bug: every reference at once
            self._free[page] = None


class FreesSharedPage(V1):
    """A shared page is freed when its first holder leaves, while others still read it."""

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


class HitsEvictedPage(V1):
    """A page reused for new content is still found under its old prefix's hash."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks = _KeepsHashes(limits.pool_pages, self.config.null_page)


class PreemptedKeepsPage(V1):
    """Preemption releases every page but the last, which stays in limbo."""

    def _preempt(self, step: Step, seq: Seq) -> None:
        seq.table = seq.table[:-1]  # the bug: the last page is neither released nor reported
        super()._preempt(step, seq)


class TokenFromNothing(V1):
    """A full prefix-cache hit leaves nothing to compute, yet a token is sampled."""

    def _hits(self, seq: Seq) -> list[int]:
        full = seq.tokens // self.limits.page_size  # the bug: no "tokens - 1" cap
        return self.blocks.lookup(self.blocks.chain(self._keys(seq, full)))


class WritesPastTable(V1):
    """The pages for a chunk are counted with a floor: KV written past the table."""

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        for seq in list(self.running):
            count = min(seq.tokens - seq.computed, step.budget)
            if count <= 0:
                continue
            needed = (seq.computed + count) // self.limits.page_size - len(seq.table)
            if needed > 0 and self.blocks.can_allocate(needed):
                seq.table += self.blocks.allocate(needed)
            step.computed[seq.id] = count
            step.budget -= count


RESERVING = EngineConfig(token_budget=4, name="vllm-v1-reserving")


class ReservesPrompt(V1):
    """Correct: reserves its whole prompt's pages when admitted (declared ``reserve_ahead``)
    and caches a page only once its KV is computed, as vLLM does. The twin of
    :class:`CachesReservedPages`, checked clean by the tests."""

    config = RESERVING
    properties = replace(RESERVING.properties(), reserve_ahead=True)

    def _admit(self, step: Step) -> None:
        admitted = len(step.admitted)
        super()._admit(step)
        size = self.limits.page_size
        for rid in step.admitted[admitted:]:
            seq = self.seqs[rid]
            ahead = pages_for(seq.tokens, size) - len(seq.table)
            if ahead > 0 and self.blocks.can_allocate(ahead):
                seq.table += self.blocks.allocate(ahead)
                self._cache_ahead(seq)

    def _cache_ahead(self, seq: Seq) -> None:
        return None


class CachesReservedPages(ReservesPrompt):
    """Caches the prompt's pages when it reserves them, not when they are computed: preempted
    before its prompt is computed, a request finds its own empty pages as a prefix hit."""

    def _cache_ahead(self, seq: Seq) -> None:
        full = seq.tokens // self.limits.page_size
        hashes = self._chain(seq, full)
        for i in range(seq.registered, full):  # the bug: registered before any KV is in them
            self.blocks.register(seq.table[i], hashes[i])
        seq.registered = full


SMALL = EngineConfig(token_budget=4, prefix_caching=False, name="vllm-v1-small")


class PreemptsOnLowPool(V1):
    """A watermark meant for admission is applied to running requests: with fewer than two
    free pages the last running request is preempted although its next chunk fits, so a long
    prompt is preempted whenever its recompute gets back to where it was (thrash)."""

    config = SMALL
    properties = SMALL.properties()

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        while self.running and self.blocks.free_count < 2:
            self._preempt(step, self.running[-1])
        super()._run(step, self.running)


PREFILL_FIRST = EngineConfig(
    token_budget=4, chunking="all", batching="prefill-first", prefix_caching=False,
    watermark_pages=0, null_page=False, name="prefill-first-small",
)  # fmt: skip


class ReadmitsItsVictim(V1):
    """Admits in a ``schedule()`` that preempted, which vLLM does not: a chunk that preempted
    itself comes straight back and takes its pages from the decodes it starved, so the engine
    cycles through the same states (the engine model's thrash, spec/proofs.md 8.3). Each
    preemption frees what the next chunk uses: LIVE-4 has nothing to say, LIVE-3 does."""

    config = PREFILL_FIRST
    properties = PREFILL_FIRST.properties()

    def _admit_unless_preempted(self, step: Step) -> None:
        self._admit(step)  # the bug: admission after a preemption


class ForgetsRunningRequests(V1):
    """Running requests are never scheduled again after their first chunk: nothing is stranded
    in the queue, but nothing finishes either. Declared without ``serves_running`` (as an engine
    whose prefill steps leave decodes out), so only LIVE-1's bound ends it, not BATCH-6."""

    properties = replace(VLLM_V1.properties(), serves_running=False)

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        return None  # the bug: the running loop is gone


NANO_NONE = EngineConfig(
    token_budget=8, chunking="none", batching="prefill-first", null_page=False, name="nano-classic"
)


class ChunksDespiteDeclaringNone(V1):
    """Declares nano-vllm's classic whole-prompt admission but chunks a prompt over the budget."""

    config = NANO_NONE
    properties = NANO_NONE.properties()

    def _may_chunk(self, step: Step) -> bool:
        return True


CAPPED = replace(
    VLLM_V1, token_budget=8, prefill_chunk=4, max_partial_prefills=1, name="vllm-v1-capped"
)


class CapsPartialPrefills(V1):
    """The correct capped design, as a class: it passes a running prefill over once one prefill
    of the batch is served, which its declaration states and BATCH-6 excuses (the twin of
    :class:`SkipsPastTheCap`)."""

    config = CAPPED
    properties = CAPPED.properties()


class SkipsPastTheCap(V1):
    """Declares a cap of one partial prefill in flight and takes it for a cap on the batch: once
    a prefill of the batch is served, every later request of the batch waits, decodes too. The
    correct design (its control) passes only the second prefill over, which BATCH-6 excuses."""

    config = CAPPED
    properties = CAPPED.properties()

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        for seq in list(seqs):
            if step.prefills >= 1:
                return  # the bug: the cap on prefills ends the whole running loop
            super()._run(step, [seq])


SHARED = Workload(  # three requests with one 8-token system prompt, in a pool that forces reuse
    "shared-prefix",
    Limits(batch_limit=2, page_size=4, pool_pages=9),
    (
        Request("a", 0, 10, 6, "sys", 8),
        Request("b", 0, 12, 6, "sys", 8),
        Request("c", 2, 9, 4, "sys", 8),
        Request("d", 3, 14, 3),
        Request("e", 9, 11, 2, "sys", 8),
    ),
)
FULL_HIT = Workload(
    "full-hit", Limits(2, 4, 8), (Request("a", 0, 8, 2, "g", 8), Request("b", 3, 8, 2, "g", 8))
)
REUSED = Workload(  # a's cached prefix pages are reused by d before e looks for them
    "reused-prefix",
    Limits(batch_limit=1, page_size=4, pool_pages=5),
    (Request("a", 0, 8, 1, "sys", 8), Request("d", 1, 16, 1), Request("e", 3, 9, 1, "sys", 8)),
)
TWO_PROMPTS = Workload(
    "two-prompts", Limits(2, 4, 8), (Request("a", 0, 6, 2), Request("b", 0, 6, 2))
)
RESERVED = Workload(  # a reserves its prompt, computes one token, r's decode preempts it
    "reserved-prefix",
    Limits(batch_limit=2, page_size=3, pool_pages=5),
    (Request("r", 0, 3, 6), Request("a", 0, 7, 1, "sys", 6), Request("b", 4, 7, 1, "sys", 6)),
)
LONG_ALONE = Workload("long-alone", Limits(1, 4, 5), (Request("a", 0, 12, 3),))
THRASH = Workload("thrash", Limits(2, 1, 7), (Request("r0", 0, 3, 2), Request("r1", 0, 6, 1)))
"""Prefill-first with no prefix cache cuts r1's chunk, which preempts itself (spec/proofs.md)."""
ONE = Workload("one", Limits(1, 4, 4), (Request("a", 0, 4, 2),))
TWO_PREFILLS = Workload(  # a and b prefill in chunks of 4 while c decodes behind them
    "two-prefills-and-a-decode",
    Limits(batch_limit=3, page_size=4, pool_pages=16),
    (Request("a", 0, 12, 2), Request("b", 0, 12, 2), Request("c", 0, 2, 4)),
)


def engine_log(
    mutant: type[V1], workload: Workload, twin: type[V1] | None = None
) -> Callable[..., Path]:
    """A writer of the log of ``mutant`` (or, with ``buggy=False``, of ``twin``: by default its
    design without the overridden method) on ``workload``."""

    def write(workdir: Path, buggy: bool = True) -> Path:
        target: type[V1] = mutant if buggy else twin or _correct(mutant)
        properties = target.properties
        recorded = run(workload, target, properties.policy, properties=properties)
        path = workdir / f"{mutant.__name__}.jsonl"
        write_log(recorded, path, properties)
        return path

    return write


def _correct(mutant: type[V1]) -> type[V1]:
    class Correct(V1):
        config = mutant.config
        properties = mutant.properties

    return Correct


MUTANTS: tuple[Mutant, ...] = (
    Mutant("engine: forgets running requests", "running requests are never scheduled again",
           "LIVE-1", write=engine_log(ForgetsRunningRequests, ONE)),
    Mutant("engine: shared page freed", "a shared page freed while another request holds it",
           "PAGE-3", write=engine_log(FreesSharedPage, SHARED)),
    Mutant("engine: hit on an evicted page", "a reused page keeps its old prefix hash",
           "PAGE-6", write=engine_log(HitsEvictedPage, REUSED)),
    Mutant("engine: hit on a reserved page", "pages cached when reserved, not when computed",
           "PAGE-6", write=engine_log(CachesReservedPages, RESERVED)),
    Mutant("engine: preempted keeps a page", "preemption keeps the last page", "PAGE-4",
           write=engine_log(PreemptedKeepsPage, SHARED)),
    Mutant("engine: token from nothing", "a full prefix hit computes nothing yet samples",
           "DEC-3", write=engine_log(TokenFromNothing, FULL_HIT)),
    Mutant("engine: KV past the table", "chunk pages counted with a floor", "PAGE-1",
           write=engine_log(WritesPastTable, SHARED)),
    Mutant("engine: thrash", "admits after a preemption: a chunk that preempted itself comes "
           "straight back", "LIVE-3", write=engine_log(ReadmitsItsVictim, THRASH)),
    Mutant("engine: preempts for nothing", "a watermark applied to running requests preempts "
           "though the next chunk fits", "LIVE-4", write=engine_log(PreemptsOnLowPool, LONG_ALONE)),
    Mutant("engine: skips past the cap", "a declared cap on partial prefills stops the whole "
           "running loop, so a decode waits too", "BATCH-6",
           write=engine_log(SkipsPastTheCap, TWO_PREFILLS)),
    Mutant("engine: chunks despite none", "declares whole prompts, chunks over the budget",
           "BATCH-5", write=engine_log(ChunksDespiteDeclaringNone, TWO_PROMPTS)),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`): engine bugs checked as fixed logs."""
