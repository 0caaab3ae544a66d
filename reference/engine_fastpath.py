"""Batched replay of the engine scheduler (spec/semantics.md, section 10) for its section-7 figures.

The stepped engine (:func:`.engine.run`) calls :class:`~.engine_scheduler.EngineScheduler` once
an iteration and the scheduler visits every running request, so an iteration costs the batch.
Here the requests past their prefill are sums, as in :mod:`.fastpath`: a decoder with computed
tokens ``c`` computes one more in each decode iteration and samples one, so its ``c`` is
``offset + clock``, where ``clock`` counts decode iterations; it takes a page when ``c`` starts
one, and it holds ``prompt + generated`` tokens, ``c + 1`` (or ``c`` for an empty prompt, which
computes a start position of its own). Pages in use and wasted slots (7.5, 7.6) are then a few
counters by ``offset % page_size``: the decoders' pages, offsets, and how many cross a page or
sit at a page's end (where ``c + 1`` overflows the table by one, which 7.6 counts as none
wasted). Only admissions, the one chunked prefill and finishes are handled one by one, so an
iteration costs what changes in it, not the batch.

The schedule is the engine scheduler's: running requests first (a decode batch, the chunk),
then FCFS admission while a slot, the budget and the pages allow (10.3); prefill-first batching
decodes only in an iteration that scheduled no prefill. :mod:`.engine_scope` says what it
models; on a preemption, a decode batch over the budget, a second chunked prefill or a run past
the stepped engine's bound it stops with :class:`Fallback`, and :func:`engine_metrics` runs the
stepped engine instead.
``tests/cover/test_engine_fastpath.py`` compares every figure, bit for bit, with the stepped engine.
"""

from __future__ import annotations

import heapq
from array import array

from kvsched.spec.workload import Workload, pages_for

from .bound import RunBound
from .columns import columns_of
from .engine import run
from .engine_scheduler import EngineScheduler
from .engine_scheduler.config import EngineConfig
from .engine_scope import engine_replay_scope
from .fastpath import Tally, metrics_of
from .metrics import RunMetrics, compute_metrics


class Fallback(Exception):
    """The run left what the replay models (a preemption, say); the stepped engine runs it."""


class _Decoders:
    """Requests past their prefill, as the sums 7.5 and 7.6 need (see the module's text)."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.size = 0
        self.clock = 0
        self.offsets = 0
        self.pages = 0
        self.prompted = 0  # members with a prompt: they hold c + 1 tokens
        self.crossing = [0] * page_size  # by offset % page_size
        self.at_end = [0] * page_size  # members with a prompt, by offset % page_size

    def join(self, computed: int, prompt: int) -> int:
        """A request whose prefill ends with ``computed`` tokens; its offset."""
        offset = computed - self.clock
        residue = offset % self.page_size
        self.size += 1
        self.offsets += offset
        self.pages += pages_for(computed, self.page_size)
        self.crossing[residue] += 1
        if prompt:
            self.prompted += 1
            self.at_end[residue] += 1
        return offset

    def leave(self, offset: int, prompt: int) -> None:
        residue = offset % self.page_size
        self.size -= 1
        self.offsets -= offset
        self.pages -= pages_for(offset + self.clock, self.page_size)
        self.crossing[residue] -= 1
        if prompt:
            self.prompted -= 1
            self.at_end[residue] -= 1

    def tick(self) -> None:
        """Every member computes and samples one token; those starting a page take it."""
        self.clock += 1
        self.pages += self.crossing[(1 - self.clock) % self.page_size]

    def wasted(self) -> int:
        held = self.offsets + self.size * self.clock + self.prompted
        return self.page_size * self.pages - held + self.at_end[-self.clock % self.page_size]


def engine_metrics(
    workload: Workload, config: EngineConfig, batched: bool = True
) -> tuple[RunMetrics, bool]:
    """Section 7's figures of the engine scheduler in ``config`` over ``workload``, as the
    stepped engine gives them; and whether the batched replay gave them (else the stepped
    engine ran, as it always does without ``batched``)."""
    if batched and engine_replay_scope(workload, config).covered:
        try:
            return engine_replay(workload, config), True
        except Fallback:
            pass
    factory = EngineScheduler.configured(config)
    stepped = run(workload, factory, properties=config.properties())
    return compute_metrics(workload, stepped.events), False


def engine_replay(workload: Workload, config: EngineConfig) -> RunMetrics:
    """The batched replay; OutOfScope outside :func:`.engine_scope.engine_replay_scope`,
    :class:`Fallback` where the run leaves it."""
    engine_replay_scope(workload, config).require("the engine scheduler's batched replay")
    columns = columns_of(workload)
    limits = workload.limits
    page_size, batch_limit = limits.page_size, limits.batch_limit
    usable = limits.pool_pages - (1 if config.null_page else 0)
    budget_per_step = config.token_budget if config.token_budget is not None else 1 << 62
    mixed = config.batching == "mixed"
    peak_admission = config.admission == "peak"
    chunking = config.chunking
    arrivals, prompts, outputs = columns.arrival, columns.prompt, columns.output
    order = columns.arrival_order()
    size = len(columns)
    bound = RunBound(workload, config.properties()).value
    admitted = array("q", bytes(8 * size))
    decoders = _Decoders(page_size)
    ending: list[tuple[int, int, int]] = []  # heap of (finish clock, request, offset)
    tally = Tally()
    head = arrived = 0
    committed = 0  # peak pages of the running requests, under peak admission
    chunked = -1  # the request part way through its prefill, if any
    chunk_done = 0  # and the tokens it has computed
    iteration = 0
    while True:
        iteration += 1
        while arrived < size and arrivals[order[arrived]] < iteration:
            arrived += 1
        budget = budget_per_step
        computed_any = False
        if mixed:
            if decoders.size > budget:
                raise Fallback("a decode batch over the token budget")
            decoders.tick()
            budget -= decoders.size
            computed_any = decoders.size > 0
        if chunked >= 0 and budget > 0 and (mixed or _left(prompts[chunked], chunk_done) > 1):
            count = min(_left(prompts[chunked], chunk_done), budget)
            chunk_done += count
            budget -= count
            computed_any = True
            if chunk_done == _left(prompts[chunked], 0):
                _sample(decoders, ending, chunked, chunk_done, prompts, outputs)
                chunked = -1
        in_use = decoders.pages + (pages_for(chunk_done, page_size) if chunked >= 0 else 0)
        if in_use > usable:
            raise Fallback("a preemption: the running requests outgrow the pool")
        # 10.3 Admission, FCFS while a slot, the budget, the chunking rule and pages allow.
        running = decoders.size + (chunked >= 0)
        if not (config.static and running):
            while head < arrived and running < batch_limit and budget > 0:
                index = order[head]
                prompt = prompts[index]
                whole = _left(prompt, 0)
                count = min(whole, budget)
                may_chunk = chunking == "all" or (chunking == "first" and not computed_any)
                if count < whole and not may_chunk:
                    break
                peak = pages_for(prompt + outputs[index], page_size)
                if peak_admission and committed + peak > usable:
                    break
                fresh = pages_for(count, page_size)
                keep = config.watermark_pages if running else 0
                if fresh + keep > usable - in_use:
                    break
                committed += peak if peak_admission else 0
                head += 1
                admitted[index] = iteration
                budget -= count
                computed_any = True
                in_use += fresh
                running += 1
                if count == whole:
                    _sample(decoders, ending, index, count, prompts, outputs)
                elif chunked >= 0:
                    # Prefill-first passes over a chunk with one token left, so a second may
                    # start beside it; which of them the decode batch then reaches is order.
                    raise Fallback("two chunked prefills at once")
                else:
                    chunked, chunk_done = index, count
        if not mixed and not computed_any and running:
            # Prefill-first: nothing to prefill, so a decode batch, the chunk's last token too.
            if running > budget:
                raise Fallback("a decode batch over the token budget")
            decoders.tick()
            if chunked >= 0:
                _sample(decoders, ending, chunked, chunk_done + 1, prompts, outputs)
                chunked = -1
            in_use = decoders.pages
            if in_use > usable:
                raise Fallback("a preemption: the running requests outgrow the pool")
        if not running:
            if head < arrived:
                raise Fallback("an idle engine left a request waiting")
            if arrived == size:
                break
            iteration = arrivals[order[arrived]]  # the next iteration is its first
            continue
        if iteration > bound:
            raise Fallback("the stepped engine's iteration bound would stop the run")
        wasted = decoders.wasted()
        if chunked >= 0:
            wasted += max(page_size * pages_for(chunk_done, page_size) - prompts[chunked], 0)
        tally.busy += 1
        tally.last = iteration
        tally.peak_pages = max(tally.peak_pages, in_use)
        tally.peak_wasted = max(tally.peak_wasted, wasted)
        tally.total_wasted += wasted
        # 3.5 Completion: requests whose last token this was free their pages.
        while ending and ending[0][0] <= decoders.clock:
            _, index, offset = heapq.heappop(ending)
            decoders.leave(offset, prompts[index])
            if peak_admission:
                committed -= pages_for(prompts[index] + outputs[index], page_size)
    return metrics_of(columns, admitted, tally)


def _left(prompt: int, computed: int) -> int:
    """Positions still to compute before the first token: an empty prompt computes one."""
    return (prompt or 1) - computed


def _sample(
    decoders: _Decoders,
    ending: list[tuple[int, int, int]],
    index: int,
    computed: int,
    prompts: array[int],
    outputs: array[int],
) -> None:
    """The prefill ends: the request samples its first token and decodes from the next."""
    offset = decoders.join(computed, prompts[index])
    heapq.heappush(ending, (decoders.clock + outputs[index] - 1, index, offset))
