"""vidur's replica schedulers (vidur/scheduler/replica_scheduler/), behind protocol
version 2, each declaring its design.

Written from vidur's descriptions, not its code, at toy scale. Common to all: pages are taken from
a FIFO pool (vidur counts pages only; the ids here are the adapter's), no prefix caching, a
request's first token comes with the iteration that completes its prefill, and a preemption is
``restart()``, declared ``restart="fold"``: what the request had processed becomes its prompt.
After its prefill that is its prompt and output so far, all recomputed; within a chunked prefill
it is the chunks computed so far, and the rest of the old prompt comes back as output tokens,
one per iteration (spec/eventlog.md 4.3.1).

- :class:`VidurVLLM`: prefill-only batches of whole prompts, FCFS, under a padded bound (batch
  size times the longest prompt within the budget) and a watermark; else a decode batch of every
  running request; the victim of a preemption is the latest-arrived running request.
- :class:`VidurSarathi`: mixed batches under ``chunk_size`` tokens: running decodes, then ongoing
  prefill chunks, then new requests, with blocks for the whole prompt at admission. A running
  request is scheduled only while a page is free, whether or not it needs one; else the latest
  admitted is restarted. Admission follows preemption in the same ``schedule()``, so one request
  may be preempted, re-admitted with the pages it released and finished in one iteration.
- :class:`VidurLightLLM`: admission by an estimate of each request's future tokens; prefill-only
  batches when nothing runs or every ``max_waiting_iters`` decode iterations.

vidur's Orca scheduler (max-length reservation, no growth, no preemption) is
:mod:`tests.engines.orca_like`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request, pages_for

BUDGET = 64
"""Sarathi's ``chunk_size``: small, so chunks and mixed batches are common at toy scale."""
PADDED_BUDGET = 4096
"""vidur vLLM's ``max_tokens_in_batch``: a whole prompt plus its output so far must fit it, as
vidur's configs ensure, or a restarted request could never come back."""
WATERMARK = 1


@dataclass
class Req:
    request: Request
    index: int
    prompt: int  # vidur's num_prefill_tokens, which a restart rewrites
    since: int = 0  # output tokens since the last restart
    processed: int = 0  # tokens whose KV is computed
    table: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def tokens(self) -> int:
        # an empty prompt computes one start position, so its first token comes from computed KV
        return self.prompt + self.since + (1 if self.prompt == 0 else 0)

    def fold(self, drop_token: bool = False) -> None:
        """vidur's ``restart()``: the tokens processed so far become the prompt. Within a
        prefill that is the KV computed; after it, the KV plus the token sampled last."""
        if self.since == 0 and self.processed:
            self.prompt = min(self.prompt, self.processed)
        else:
            self.prompt = self.processed if drop_token else self.prompt + self.since
        self.since, self.processed = 0, 0

    @property
    def left(self) -> int:
        return self.tokens - self.processed


class _Replica:
    """What every vidur replica scheduler shares: the pool, the queues, restart and finish."""

    drop_token = False
    """A planted bug: a restart after the prefill folds only the KV computed, forgetting the
    token sampled last, which the request then produces again from too little KV (DEC-3)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.free: deque[int] = deque(range(limits.pool_pages))
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.reqs: dict[str, Req] = {}
        self._reset()

    def _reset(self) -> None:
        self.computed: dict[str, int] = {}
        self.admitted: list[str] = []
        self.preempted: list[str] = []
        self.preempt_freed: dict[str, tuple[int, ...]] = {}

    def add_request(self, request: Request) -> None:
        req = Req(request, len(self.reqs), request.prompt_tokens)
        self.reqs[request.id] = req
        self.waiting.append(req)

    def _grow(self, req: Req, tokens: int) -> bool:
        missing = pages_for(tokens, self.limits.page_size) - len(req.table)
        if missing > len(self.free):
            return False
        req.table += [self.free.popleft() for _ in range(max(missing, 0))]
        return True

    def _restart(self, req: Req) -> None:
        self.running.remove(req)
        self.free.extend(req.table)
        self.preempt_freed[req.id] = tuple(req.table)
        self.preempted.append(req.id)
        self.computed.pop(req.id, None)
        req.table = []
        req.fold(self.drop_token)
        self.waiting.appendleft(req)

    def _admit(self, req: Req, count: int) -> None:
        self.waiting.remove(req)
        self.running.append(req)
        self.admitted.append(req.id)
        self.computed[req.id] = count

    def _decode(self) -> None:
        """Every running request decodes; one short of a page restarts the latest arrived."""
        for req in sorted(self.running, key=lambda r: r.index):
            if req not in self.running:
                continue
            while not self._grow(req, req.processed + 1):
                self._restart(max(self.running, key=lambda r: r.index))
                if req not in self.running:
                    break
            else:
                self.computed[req.id] = 1

    def _batch(self) -> ScheduledBatch:
        decode = []
        for rid, count in self.computed.items():
            req = self.reqs[rid]
            req.processed += count
            if req.processed == req.tokens:
                decode.append(rid)
        batch = ScheduledBatch(
            admitted=tuple(self.admitted),
            decode=tuple(decode),
            page_tables={r.id: tuple(r.table) for r in self.running},
            computed=dict(self.computed),
            preempted=tuple(self.preempted),
            preempt_freed=dict(self.preempt_freed),
            waiting=tuple(r.id for r in self.waiting),
        )
        self._reset()
        return batch

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        for rid, count in output.tokens.items():
            self.reqs[rid].since += count
        freed = {}
        for rid in output.stopped:
            req = self.reqs[rid]
            self.running.remove(req)
            self.free.extend(req.table)
            freed[rid] = tuple(req.table)
            req.table = []
        return StepOutcome(tuple(output.stopped), freed, len(self.free))


class VidurVLLM(_Replica):
    properties = TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=PADDED_BUDGET,
        budget="padded",
        preemption=True,
        restart="fold",
        watermark_pages=WATERMARK,
        order="fcfs",
        chunking="none",
    )

    def schedule(self) -> ScheduledBatch:
        longest = 0
        for req in list(self.waiting):
            size = len(self.admitted) + 1
            longest = max(longest, req.tokens)
            needed = pages_for(req.tokens, self.limits.page_size)
            keep = WATERMARK if self.running or self.admitted else 0
            if (
                len(self.running) >= self.limits.batch_limit
                or size * longest > PADDED_BUDGET
                or needed + keep > len(self.free)
            ):
                break
            self._grow(req, req.tokens)
            self._admit(req, req.tokens)
        if not self.admitted:
            self._decode()
        return self._batch()


class VidurSarathi(_Replica):
    properties = TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=BUDGET,
        chunked_prefill=True,
        chunking="all",
        preemption=True,
        restart="fold",
        reserve_ahead=True,
        order="fcfs",
    )

    def schedule(self) -> ScheduledBatch:
        decoding = [r for r in self.running if r.left == 1]
        for req in sorted(decoding, key=lambda r: r.index):
            if req not in self.running:
                continue
            # vidur schedules a running request only while a page is free, whether or not it
            # needs one; a victim at the head of the queue may then get its pages back at once
            while not (self.free and self._grow(req, req.processed + 1)):
                self._restart(self.running[-1])
                if req not in self.running:
                    break
            else:
                self.computed[req.id] = 1
        left = BUDGET - sum(self.computed.values())
        for req in [r for r in self.running if r.left > 1]:
            count = min(req.left, left)
            if count > 0:
                self.computed[req.id] = count
                left -= count
        for req in list(self.waiting):
            # blocks for the whole prompt at admission: a reservation, declared reserve_ahead
            if len(self.running) >= self.limits.batch_limit or left <= 0:
                break
            if not self._grow(req, req.tokens):
                break
            count = min(req.tokens, left)
            self._admit(req, count)
            left -= count
        return self._batch()


class VidurSarathiDropsToken(VidurSarathi):
    """VidurSarathi with the planted fold bug of :attr:`_Replica.drop_token`."""

    drop_token = True


MAX_WAITING_ITERS = 3


class VidurLightLLM(_Replica):
    properties = TargetProperties(
        policy="continuous",
        admission="peak",
        estimate_admission=True,
        order="fcfs",
        chunking="none",
    )

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.decodes_since_prefill = 0

    def _estimate(self, req: Req) -> int:
        """Pages a request will hold at its end: LightLLM's estimate of its future tokens."""
        return pages_for(
            req.request.prompt_tokens + req.request.output_tokens, self.limits.page_size
        )

    def schedule(self) -> ScheduledBatch:
        if not self.running or self.decodes_since_prefill >= MAX_WAITING_ITERS:
            committed = sum(self._estimate(r) for r in self.running)
            for req in list(self.waiting):
                if len(self.running) >= self.limits.batch_limit:
                    break
                committed += self._estimate(req)
                if committed > self.limits.pool_pages:
                    break
                self._grow(req, req.tokens)
                self._admit(req, req.tokens)
        if self.admitted:
            self.decodes_since_prefill = 0
        else:
            self.decodes_since_prefill += 1
            for req in self.running:
                self._grow(req, req.processed + 1)
                self.computed[req.id] = 1
        return self._batch()
