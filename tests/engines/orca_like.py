"""An Orca-style baseline (PagedAttention section 6.1, "Orca (Max)"), behind the scheduler protocol.

Iteration-level scheduling, FCFS, and an allocator that reserves at admission enough pages for
``max_model_len`` tokens (or the request's own prompt plus output, if longer), then never
allocates again: the reservation is the request's KV space until it finishes. It runs under the
reference engine like any third-party scheduler, so its events are the lesson model's.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection

from kvsched.reference import PagePool
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, SchedulerFactory, StepOutcome
from kvsched.spec.workload import Limits, Request

BUGS = {
    "prompt_only_reservation": "PAGE-1",  # reserves the prompt and never grows: KV overruns it
    "keep_reservation": "PAGE-4",  # a finished request's reservation is never released
}


def properties(max_model_len: int) -> TargetProperties:
    return TargetProperties(policy="continuous", reserve_ahead=True, max_model_len=max_model_len)


def scheduler(max_model_len: int, bugs: Collection[str] = ()) -> SchedulerFactory:
    """A factory of Orca-style schedulers reserving ``max_model_len`` tokens per request."""

    def build(limits: Limits) -> OrcaScheduler:
        return OrcaScheduler(limits, max_model_len, set(bugs))

    build.policy = OrcaScheduler.policy  # type: ignore[attr-defined]  # read by engine.run
    return build


class OrcaScheduler:
    policy = "continuous"

    def __init__(self, limits: Limits, max_model_len: int, bugs: set[str]) -> None:
        self.limits, self.max_model_len, self.bugs = limits, max_model_len, bugs
        self.pool = PagePool(limits.pool_pages)
        self.waiting: deque[Request] = deque()
        self.running: list[tuple[Request, list[int]]] = []
        self.generated: dict[str, int] = {}

    def reservation(self, request: Request) -> int:
        tokens = max(self.max_model_len, request.prompt_tokens + request.output_tokens)
        if "prompt_only_reservation" in self.bugs:
            tokens = request.prompt_tokens + 1
        return math.ceil(tokens / self.limits.page_size)

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def schedule(self) -> ScheduledBatch:
        admitted = []
        while (
            self.waiting
            and len(self.running) < self.limits.batch_limit
            and self.pool.can_allocate(self.reservation(self.waiting[0]))
        ):
            request = self.waiting.popleft()
            pages = self.pool.allocate(request.id, self.reservation(request))
            self.running.append((request, pages))
            self.generated[request.id] = 0
            admitted.append(request.id)
        return ScheduledBatch(
            admitted=tuple(admitted),
            decode=tuple(r.id for r, _ in self.running),
            page_tables={r.id: tuple(pages) for r, pages in self.running},
        )

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        finished, freed, still = [], {}, []
        for request, pages in self.running:
            self.generated[request.id] += output.tokens.get(request.id, 0)
            if self.generated[request.id] < request.output_tokens:
                still.append((request, pages))
                continue
            finished.append(request.id)
            if "keep_reservation" not in self.bugs:
                self.pool.free(request.id, pages)
                freed[request.id] = tuple(pages)
        self.running = still
        return StepOutcome(tuple(finished), freed, self.pool.free_count)
