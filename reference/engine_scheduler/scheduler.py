"""The reference engine scheduler: vLLM v1's token accounting on nano-vllm's shape
(spec/semantics.md, section 10).

There is no prefill or decode phase: a request has ``computed`` tokens that catch up with its
known tokens (prompt plus output so far) under a token budget; the iteration whose chunk reaches
them samples a token. Pages are taken as tokens are computed; a running request that cannot get
them preempts a victim by recompute, which releases every page and returns to the waiting queue.
A request learns it is done only from the model (``ModelOutput.stopped``), as on an EOS, so the
output length is not read, except by the lesson's peak admission, which needs it by definition.
It speaks protocol version 2 (spec/protocol.py) and declares its design (:mod:`.config`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, infeasible, pages_for, peak_pages

from .blocks import BlockManager, PageKey
from .config import VLLM_V1, EngineConfig
from .sequence import Seq, Status

UNBOUNDED = 1 << 62


@dataclass
class Step:
    """One ``schedule()`` as it is built: what each request computes, takes and releases."""

    budget: int
    computed: dict[str, int] = field(default_factory=dict)
    cached: dict[str, int] = field(default_factory=dict)
    shared: dict[str, tuple[int, ...]] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    preempt_freed: dict[str, tuple[int, ...]] = field(default_factory=dict)
    fresh: dict[str, int] = field(default_factory=dict)
    """Pages each running request took in this ``schedule()``, at the end of its table."""
    chunk: int = UNBOUNDED
    """The most tokens one request computes in this step (``prefill_chunk``, where it applies)."""
    prefills: int = 0
    """Running requests that computed a prefill chunk in this step, against
    ``max_partial_prefills``; admissions are not capped. A priority victim scheduled earlier
    keeps its place: the step spent it."""


class EngineScheduler:
    """An engine-grade scheduler; ``EngineScheduler.configured(cfg)`` builds a target class."""

    config: EngineConfig = VLLM_V1

    def __init__(self, limits: Limits, config: EngineConfig | None = None) -> None:
        self.config = config or type(self).config
        self.limits = limits
        self.blocks = BlockManager(limits.pool_pages, self.config.null_page)
        self.waiting: list[Seq] = []  # head first
        self.running: list[Seq] = []  # admission order
        self.seqs: dict[str, Seq] = {}
        self.committed = 0  # peak pages of the batch, under peak admission only
        self.rejected: list[str] = []  # finished without output in this iteration (LIVE-5)
        self.unservable = 0  # requests waiting that the pool can never hold (LIVE-5)
        # State slots (SLOT-1, SLOT-2): the free ids, a heap so the lowest goes first, and the
        # slot each running request holds.
        slots = self.config.state_slots
        self.free_slots: list[int] = [] if slots is None else list(range(slots))
        self.slot_of: dict[str, int] = {}

    @classmethod
    def configured(cls, config: EngineConfig) -> type[EngineScheduler]:
        """A subclass that builds with ``config`` and declares its properties, for ``check``."""
        properties = config.properties()
        name = f"EngineScheduler[{config.name}]"
        attrs = {"config": config, "policy": properties.policy, "properties": properties}
        return type(name, (cls,), attrs)

    # protocol ---------------------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        seq = Seq(request, len(self.seqs))
        self.seqs[request.id] = seq
        self.waiting.append(seq)
        if self._infeasible(seq):
            self.unservable += 1
            if self.config.rejects_infeasible == "at-arrival":
                self._reject(seq)  # LIVE-5: never queued in front of anyone

    def schedule(self) -> ScheduledBatch:
        cfg = self.config
        step = Step(cfg.token_budget if cfg.token_budget is not None else UNBOUNDED)
        # LIVE-5, "at-head": a request the pool can never hold is failed as it comes to be
        # scheduled, before anything waits behind it for another step.
        while self.unservable and (queue := self._queue()) and self._infeasible(queue[0]):
            self._reject(queue[0])
        # vLLM 0.33 caps a chunk (long_prefill_token_threshold) only while another request runs
        # or waits: a request alone starves nobody.
        if cfg.prefill_chunk is not None and len(self.running) + len(self.waiting) > 1:
            step.chunk = cfg.prefill_chunk
        if cfg.batching == "mixed":
            self._run(step, self.running)
            self._admit_unless_preempted(step)
        else:  # prefill-first: continuing chunks and admissions, else a decode batch
            self._run(step, [s for s in self.running if s.tokens - s.computed > 1])
            self._admit_unless_preempted(step)
            if not step.computed:
                self._run(step, self.running)
        decode = []
        caching, page_size = cfg.prefix_caching, self.limits.page_size
        for rid, count in step.computed.items():
            seq = self.seqs[rid]
            seq.computed += count
            if caching and seq.computed >= (seq.registered + 1) * page_size:  # a page filled
                self._register_full_pages(seq)
            if seq.computed == seq.tokens:  # the chunk reached the end: sample a token
                decode.append(rid)
        return ScheduledBatch(
            admitted=tuple(step.admitted),
            decode=tuple(decode),
            page_tables={s.id: s.pages() for s in self.running},
            computed=dict(step.computed),
            cached=step.cached,
            shared=step.shared,
            preempted=tuple(step.preempted),
            preempt_freed=step.preempt_freed,
            waiting=tuple(s.id for s in self._queue()),
            slots=self._slots(),
        )

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        for rid, count in output.tokens.items():
            self.seqs[rid].append(count)
        freed: dict[str, tuple[int, ...]] = {}
        rejected, self.rejected = self.rejected, []
        for rid in output.stopped:
            seq = self.seqs[rid]
            self.running.remove(seq)
            seq.status = Status.FINISHED
            self.blocks.release(seq.table)
            freed[rid] = tuple(seq.table)
            seq.table = []
            self._give_slot(seq)
            if self.config.admission == "peak":
                self.committed -= peak_pages(seq.request, self.limits.page_size)
        finished = (*output.stopped, *rejected)
        slots = self._slots()
        free = None if slots is None else len(self.free_slots)
        return StepOutcome(tuple(finished), freed, self.blocks.free_count, slots, free)

    # state slots (SLOT-1, SLOT-2) -------------------------------------------------------------
    def _slots(self) -> dict[str, int] | None:
        """Who holds which state slot, for the protocol; ``None`` without a slot pool."""
        return None if self.config.state_slots is None else dict(self.slot_of)

    def _slot_free(self) -> bool:
        """Whether a request may be admitted as far as state slots go."""
        return self.config.state_slots is None or bool(self.free_slots)

    def _take_slot(self, seq: Seq) -> None:
        if self.config.state_slots is not None:
            self.slot_of[seq.id] = heapq.heappop(self.free_slots)

    def _give_slot(self, seq: Seq) -> None:
        """SLOT-2: a request that leaves the batch gives its slot back."""
        slot = self.slot_of.pop(seq.id, None)
        if slot is not None:
            heapq.heappush(self.free_slots, slot)

    def _admission_failed(self, seq: Seq) -> None:
        """An admission that took a slot and then found no pages gives the slot back (the fix
        of SGLang #16067, whose request went back to the queue holding it)."""
        self._give_slot(seq)

    # requests no scheduler can hold (semantics.md 1.2) -----------------------------------------
    def _infeasible(self, seq: Seq) -> bool:
        """Whether the pool can never hold ``seq`` at its peak (its most output: vLLM's
        ``max_tokens``, the one place the output length is read for it), as the workload's
        own rule says (semantics.md 1.2)."""
        return infeasible(seq.request, self.limits)

    def _reject(self, seq: Seq) -> None:
        """LIVE-5: a waiting request the pool can never hold leaves the queue unserved and is
        reported finished, holding nothing, in this iteration's update."""
        self.waiting.remove(seq)
        seq.status = Status.FINISHED
        self.rejected.append(seq.id)
        self.unservable -= 1

    # running requests -------------------------------------------------------------------------
    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        """Schedule running requests in order; one short of pages preempts a victim (10.4). In
        a mixed batch (vLLM v1's running loop) a request that is its own victim leaves the rest
        to be served as far as the budget reaches (BATCH-6): under priority order they outrank
        it. A prefill-first step ends there.

        As vLLM's running loop, a request with nothing it may compute in the step is passed over
        (``continue``, not ``break``): one in its prefill once the declared cap on prefills is
        reached (``max_partial_prefills``, which BATCH-6 excuses), one whose whole prompt does
        not fit the budget left."""
        whole, page_size = self.config.chunking == "none", self.limits.page_size
        cap = self.config.max_partial_prefills
        for seq in list(seqs):
            if seq.status is not Status.RUNNING or step.budget <= 0:  # preempted meanwhile
                continue
            prefilling = seq.generated == seq.admitted_with
            if prefilling and cap is not None and step.prefills >= cap:
                continue
            left = seq.tokens - seq.computed
            count = min(left, step.budget, step.chunk)
            if count <= 0 or (whole and count < left):
                continue
            needed = pages_for(seq.computed + count, page_size) - len(seq.table)
            # Most decodes stay inside their last page; a table reserved ahead (a subclass
            # that reserves at admission) may cover the chunk already.
            if needed > 0:
                while not self.blocks.can_allocate(needed):
                    victim = self._victim()
                    self._preempt(step, victim)
                    if victim is seq:
                        break
                if seq.status is not Status.RUNNING:
                    if self.config.batching == "mixed":
                        continue
                    return
                seq.table += self.blocks.allocate(needed)
                step.fresh[seq.id] = step.fresh.get(seq.id, 0) + needed
            step.computed[seq.id] = count
            step.budget -= count
            step.prefills += prefilling

    def _victim(self) -> Seq:
        """The last admitted or lowest priority: the oldest keeps its progress (LIVE-3)."""
        if self.config.victim == "last":
            return self.running[-1]
        return max(self.running, key=lambda s: (s.request.priority, s.index))

    def _preempt(self, step: Step, seq: Seq) -> None:
        """Recompute preemption: every page released, KV forgotten, back to the queue (10.4)."""
        self.running.remove(seq)
        seq.status = Status.WAITING
        step.budget += step.computed.pop(seq.id, 0)
        self.blocks.release(seq.table)
        self._give_slot(seq)
        # A victim scheduled earlier in this schedule() (the priority victim can be) took pages
        # that never showed in a table: preemption comes before allocation in the iteration's
        # order (10.4), so it releases what it held when the iteration began.
        held = len(seq.table) - step.fresh.pop(seq.id, 0)
        step.preempt_freed[seq.id] = tuple(seq.table[:held])
        step.preempted.append(seq.id)
        seq.table, seq.computed, seq.registered = [], 0, 0
        self.waiting.insert(0, seq)

    # admission --------------------------------------------------------------------------------
    def _queue(self) -> list[Seq]:
        """The waiting queue in the declared order; fcfs keeps preempted requests at the head."""
        order = self.config.order
        if order == "priority":
            return sorted(self.waiting, key=lambda s: (s.request.priority, s.index))
        if order == "shortest-first":
            return sorted(self.waiting, key=lambda s: (s.request.prompt_tokens, s.index))
        return self.waiting

    def _admit_unless_preempted(self, step: Step) -> None:
        """vLLM admits nobody in a schedule() that preempted (10.4). Otherwise a chunk that
        preempted itself comes straight back, takes its pages from the decodes it starved, and
        prefill-first can livelock (the engine model's thrash, spec/proofs.md 8.3)."""
        if not step.preempted or self.config.admit_after_preemption:
            self._admit(step)

    def _admit(self, step: Step) -> None:
        """Admit from the queue's head while a slot, the budget and pages allow (10.3)."""
        cfg, page_size = self.config, self.limits.page_size
        if cfg.static and self.running:
            return
        if len(self.running) >= self.limits.batch_limit or step.budget <= 0:
            return  # before the queue is copied (sorted, in some orders) for nothing
        if not self._slot_free():
            return
        for seq in list(self._queue()):
            if self.unservable and self._infeasible(seq):
                self._reject(seq)  # LIVE-5: failed as it comes to be scheduled, blocking no one
                continue
            if len(self.running) >= self.limits.batch_limit or step.budget <= 0:
                return
            if not self._slot_free():
                return  # head-of-line: every state slot is held
            hits = self._hits(seq)
            known = len(hits) * page_size
            count = min(seq.tokens - known, step.budget, step.chunk)
            if count < seq.tokens - known and not self._may_chunk(step):
                return  # head-of-line: nobody overtakes a request that does not fit
            if cfg.admission == "peak":
                peak = peak_pages(seq.request, page_size)
                if self.committed + peak > self.blocks.usable:
                    return
            fresh = pages_for(known + count, page_size) - len(hits)
            revived = sum(1 for page in hits if page not in self.blocks.ref)
            # The watermark keeps room for running requests to grow; an idle engine ignores it,
            # or a request bigger than the pool minus the watermark would wait forever (LIVE-2).
            keep = cfg.watermark_pages if self.running else 0
            self._take_slot(seq)  # first, as SGLang takes its mamba slot before the pages
            if not self.blocks.can_allocate(fresh + revived, keep):
                self._admission_failed(seq)
                return
            if cfg.admission == "peak":
                self.committed += peak_pages(seq.request, page_size)
            self.blocks.share(hits)
            seq.table = hits + self.blocks.allocate(fresh)
            seq.computed, seq.registered = known, len(hits)
            if hits:
                step.cached[seq.id] = known
                step.shared[seq.id] = tuple(hits)
            self.waiting.remove(seq)
            self.running.append(seq)
            seq.status = Status.RUNNING
            seq.admitted_with = seq.generated
            step.admitted.append(seq.id)
            step.computed[seq.id] = count
            step.budget -= count

    def _may_chunk(self, step: Step) -> bool:
        """Whether the admission may be cut to the budget left (BATCH-5)."""
        chunking = self.config.chunking
        return chunking == "all" or (chunking == "first" and not step.computed)

    # prefix cache -----------------------------------------------------------------------------
    def _keys(self, seq: Seq, pages: int, start: int = 0) -> list[PageKey]:
        """What full pages ``start .. pages - 1`` hold (section 1.1)."""
        request, size = seq.request, self.limits.page_size
        return [
            (request.prefix_group, i)
            if request.prefix_group and (i + 1) * size <= request.prefix_tokens
            else (request.id, i)
            for i in range(start, pages)
        ]

    def _chain(self, seq: Seq, pages: int) -> list[int]:
        """The chain hashes of the request's first ``pages`` full pages, each made once."""
        hashes = seq.hashes
        if len(hashes) < pages:
            parent = hashes[-1] if hashes else -1
            hashes += self.blocks.chain(self._keys(seq, pages, len(hashes)), parent)
        return hashes[:pages]

    def _hits(self, seq: Seq) -> list[int]:
        """Cached pages of the request's prefix; at least one token is left to compute."""
        if not self.config.prefix_caching:
            return []
        full = (seq.tokens - 1) // self.limits.page_size  # vLLM caps a hit at tokens - 1
        return self.blocks.lookup(self._chain(seq, full))

    def _register_full_pages(self, seq: Seq) -> None:
        if not self.config.prefix_caching:
            return
        full = seq.computed // self.limits.page_size
        if full <= seq.registered:
            return
        hashes = self._chain(seq, full)
        for i in range(seq.registered, full):
            self.blocks.register(seq.table[i], hashes[i])
        seq.registered = full
