"""A vLLM-v1-like scheduler at toy scale (vllm/v1/core/sched/), writing kvsched events.

No prefill or decode phases: each request has ``computed`` tokens and a target (prompt plus
output so far), and every iteration hands out a token budget so ``computed`` catches up. Running
requests go first, in order; one that cannot get its blocks preempts the last running request
(possibly itself), which frees every block, forgets its KV and returns to the head of the waiting
queue. Waiting requests are admitted FCFS only in an iteration that preempted nothing, after a
prefix-cache lookup capped so at least one token is computed. A request samples a token in the
iteration whose chunk reaches its target. Block 0 is the null block.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field, replace

from kvsched.reference.engine import Run
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Request, Workload

from .blocks import BlockPool, make_event

BUGS = {
    "leak_on_finish": "PAGE-4",  # a finished request's blocks are never freed (vllm#46283)
    "uncapped_prefix_hit": "DEC-3",  # a full-prompt hit leaves nothing to compute (nano#144)
    "short_allocation": "PAGE-1",  # floor instead of ceil: KV written past the blocks held
    "strict_fit": "BATCH-3",  # admits only if the blocks fit with one to spare: head stranded
    "double_free_shared": "PAGE-3",  # prefix blocks freed twice on finish (vllm#1556)
    "ghost_revival": "PAGE-2",  # a revived cached block stays in the free queue (trtllm#12667)
}


def properties(token_budget: int) -> TargetProperties:
    return TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=token_budget,
        chunked_prefill=True,
        preemption=True,
        prefix_sharing=True,
        reserved_pages=(0,),
    )


@dataclass
class Seq:
    request: Request
    prefix: tuple[str, int] | None  # (prefix key, prompt tokens shared with its group)
    computed: int = 0  # tokens whose KV the blocks hold (vLLM's num_computed_tokens)
    generated: int = 0
    table: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def target(self) -> int:
        return self.request.prompt_tokens + self.generated

    def keys(self, block_size: int) -> list[Hashable]:
        """Cache keys of the blocks that lie wholly inside the shared prefix."""
        if self.prefix is None:
            return []
        key, tokens = self.prefix
        return [(key, i) for i in range(tokens // block_size)]


def simulate(
    workload: Workload,
    token_budget: int = 8,
    prefixes: Mapping[str, tuple[str, int]] | None = None,
    bugs: Collection[str] = (),
) -> Run:
    """Run ``workload`` through the simulated scheduler; ``prefixes`` gives shared prompt heads."""
    unknown = set(bugs) - set(BUGS)
    assert not unknown, f"unknown bugs {unknown}"
    if prefixes:  # the workload says what is shared, so the monitor can check hits (PAGE-6)
        workload = replace(
            workload,
            requests=tuple(
                replace(r, prefix_group=prefixes[r.id][0], prefix_tokens=prefixes[r.id][1])
                if r.id in prefixes
                else r
                for r in workload.requests
            ),
        )
    shared = {r.id: (r.prefix_group, r.prefix_tokens) for r in workload.requests if r.prefix_group}
    return _Engine(workload, token_budget, shared, set(bugs)).run()


class _Engine:
    def __init__(
        self,
        workload: Workload,
        budget: int,
        prefixes: Mapping[str, tuple[str, int]],
        bugs: set[str],
    ) -> None:
        self.workload, self.budget, self.bugs = workload, budget, bugs
        self.limits = workload.limits
        self.bs = workload.limits.page_size
        ghost = "ghost_revival" in bugs
        self.pool = BlockPool(self.limits.pool_pages, null_block=True, ghost=ghost)
        self.arrivals = deque(
            Seq(r, prefixes.get(r.id)) for r in sorted(workload.requests, key=lambda r: r.arrival)
        )
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.tables: dict[str, tuple[int, ...]] = {}

    def blocks_for(self, tokens: int) -> int:
        if "short_allocation" in self.bugs:
            return tokens // self.bs
        return math.ceil(tokens / self.bs)

    def run(self) -> Run:
        events: list[IterationEvent] = []
        everyone = len(self.workload.requests)
        done = 0
        # Enough for any correct run; a stranded request is logged idling until the cap.
        requests = self.workload.requests
        cap = 2 * max(r.arrival for r in requests) + sum(
            r.prompt_tokens + r.output_tokens for r in requests
        )
        cap += 10
        while done < everyone and len(events) < cap:
            event = self.step(len(events) + 1)
            events.append(event)
            done += len(event.finished)
        return Run(self.workload, "continuous", tuple(events), drained=done == everyone)

    def step(self, n: int) -> IterationEvent:
        arrived = []
        while self.arrivals and self.arrivals[0].request.arrival < n:
            seq = self.arrivals.popleft()
            self.waiting.append(seq)
            arrived.append(seq.id)
        budget = self.budget
        scheduled: dict[str, int] = {}
        preempted: list[str] = []
        freed: dict[str, list[int]] = {}

        # Pass 1: the running requests, in order; preempt from the back when blocks run out.
        i = 0
        while i < len(self.running):
            seq = self.running[i]
            new = min(seq.target - seq.computed, budget)
            if new <= 0:
                i += 1
                continue
            need = self.blocks_for(seq.computed + new) - len(seq.table)
            while need > self.pool.num_free:
                victim = self.running.pop()
                freed[victim.id] = list(victim.table)
                self.pool.free(reversed(victim.table))
                victim.table, victim.computed = [], 0
                self.waiting.appendleft(victim)
                preempted.append(victim.id)
                if victim is seq:
                    break
            if seq.id in preempted:
                continue
            seq.table += self.pool.get_new(max(need, 0))
            scheduled[seq.id] = new
            budget -= new
            i += 1

        # Pass 2: admit from the head of the queue, only if nothing was preempted.
        admitted: list[str] = []
        cached: dict[str, int] = {}
        shared: dict[str, list[int]] = {}
        while (
            not preempted
            and self.waiting
            and budget > 0
            and len(self.running) < self.limits.batch_limit
        ):
            seq = self.waiting[0]
            hits = self.pool.lookup(seq.keys(self.bs))
            most = seq.target if "uncapped_prefix_hit" in self.bugs else seq.target - 1
            hits = hits[: most // self.bs]
            hit_tokens = len(hits) * self.bs
            new = min(seq.target - hit_tokens, budget)
            need = self.blocks_for(hit_tokens + new) - len(hits)
            supply = need + self.pool.revived(hits)
            spare = 1 if "strict_fit" in self.bugs else 0
            if supply + spare > self.pool.num_free:
                break  # head-of-line blocking: nothing overtakes the head
            self.waiting.popleft()
            self.pool.touch(hits)
            seq.table = hits + self.pool.get_new(max(need, 0))
            seq.computed = hit_tokens
            cached[seq.id], shared[seq.id] = hit_tokens, hits
            self.running.append(seq)
            admitted.append(seq.id)
            scheduled[seq.id] = new
            budget -= new

        # The model runs: chunks are computed; a chunk that reaches the target samples a token.
        decoded = []
        for seq in self.running:
            if seq.id not in scheduled:
                continue
            seq.computed += scheduled[seq.id]
            if seq.computed == seq.target:
                seq.generated += 1
                decoded.append(seq.id)
            if seq.prefix is not None:  # register the prefix blocks that are now full
                key, tokens = seq.prefix
                for b in range(min(seq.computed, tokens) // self.bs):
                    self.pool.cache(seq.table[b], (key, b))

        active = [seq.id for seq in self.running]
        tables = {seq.id: tuple(seq.table) for seq in self.running}
        finished = [seq for seq in self.running if seq.generated == seq.request.output_tokens]
        for seq in finished:
            self.running.remove(seq)
            if "leak_on_finish" in self.bugs:
                continue
            released = list(seq.table)
            if "double_free_shared" in self.bugs:
                released += seq.table[: len(seq.keys(self.bs))]
            freed[seq.id] = released
            self.pool.free(reversed(released))
        event = make_event(
            n,
            arrived=arrived,
            admitted=admitted,
            active=active,
            decoded=decoded,
            finished=[seq.id for seq in finished],
            tables=tables,
            before=self.tables,
            freed=freed,
            free_pages=self.pool.num_free,
            waiting=[s.id for s in self.waiting],
            computed=scheduled,
            cached=cached,
            shared=shared,
            preempted=preempted,
        )
        self.tables = {seq.id: tuple(seq.table) for seq in self.running}
        return event
