"""A nano-vllm-like scheduler (nanovllm/engine/scheduler.py's steps), writing kvsched events.

An iteration is either all prefill or all decode. Prefill admits whole prompts from the head of
the waiting queue while slots, the token budget and free blocks allow; if it admitted anything,
the iteration is a prefill. Otherwise every running sequence decodes one token, taking a block
when its next token starts one; if none is free it preempts the last running sequence (or
itself), which frees its blocks and returns to the head of the queue to recompute. A sequence's
KV covers its prompt and every output token but the last sampled one, as in nano-vllm.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from kvsched.reference.engine import Run
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Request, Workload

from .blocks import BlockPool, make_event


def properties(token_budget: int) -> TargetProperties:
    return TargetProperties(
        policy="continuous", admission="lazy", token_budget=token_budget, preemption=True
    )


@dataclass
class Seq:
    request: Request
    generated: int = 0
    table: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.request.id

    def __len__(self) -> int:
        return self.request.prompt_tokens + self.generated


def simulate(workload: Workload, token_budget: int = 64) -> Run:
    limits = workload.limits
    bs = limits.page_size
    pool = BlockPool(limits.pool_pages)
    arrivals = deque(Seq(r) for r in sorted(workload.requests, key=lambda r: r.arrival))
    waiting: deque[Seq] = deque()
    running: list[Seq] = []
    before: dict[str, tuple[int, ...]] = {}
    events: list[IterationEvent] = []
    done, everyone = 0, len(workload.requests)
    while done < everyone and len(events) < 100_000:
        n = len(events) + 1
        arrived = []
        while arrivals and arrivals[0].request.arrival < n:
            arrived.append(arrivals[0].id)
            waiting.append(arrivals.popleft())
        computed: dict[str, int] = {}
        admitted: list[str] = []
        preempted: list[str] = []
        freed: dict[str, list[int]] = {}
        batched = 0
        while waiting and len(running) < limits.batch_limit:  # prefill
            seq = waiting[0]
            need = math.ceil(len(seq) / bs)
            if batched + len(seq) > token_budget or need > pool.num_free:
                break
            waiting.popleft()
            seq.table = pool.get_new(need)
            running.append(seq)
            admitted.append(seq.id)
            computed[seq.id] = len(seq)
            batched += len(seq)
        if not admitted:  # decode
            for seq in list(running):
                if seq not in running:
                    continue  # preempted by an earlier sequence of this iteration
                while math.ceil(len(seq) / bs) > len(seq.table) and pool.num_free == 0:
                    victim = running.pop()
                    freed[victim.id] = list(victim.table)
                    pool.free(reversed(victim.table))
                    victim.table = []
                    waiting.appendleft(victim)
                    preempted.append(victim.id)
                    if victim is seq:
                        break
                if seq in running:
                    seq.table += pool.get_new(math.ceil(len(seq) / bs) - len(seq.table))
                    computed[seq.id] = 1
        decoded = [rid for rid in computed]
        for seq in running:
            if seq.id in computed:
                seq.generated += 1
        active = [seq.id for seq in running]
        tables = {seq.id: tuple(seq.table) for seq in running}
        finished = [seq for seq in running if seq.generated == seq.request.output_tokens]
        for seq in finished:
            running.remove(seq)
            freed[seq.id] = list(seq.table)
            pool.free(reversed(seq.table))
        events.append(
            make_event(
                n,
                arrived=arrived,
                admitted=admitted,
                active=active,
                decoded=decoded,
                finished=[s.id for s in finished],
                tables=tables,
                before=before,
                freed=freed,
                free_pages=pool.num_free,
                waiting=[s.id for s in waiting],
                computed=computed,
                preempted=preempted,
            )
        )
        before = {seq.id: tuple(seq.table) for seq in running}
        done += len(finished)
    return Run(workload, "continuous", tuple(events), drained=done == everyone)
