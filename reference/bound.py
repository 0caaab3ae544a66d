"""The iteration bound of a run, with the allowances a declared target earns (spec/semantics.md,
3.6; spec/eventlog.md, 4.2, 4.3 and 4.8).

The lesson's bound is the last arrival plus every output token. A target that chunks prefills
under a token budget earns ``ceil(prompt / budget)`` iterations per request, and
``ceil(lost / budget)`` for the KV tokens each preemption drops, and one iteration per prompt token
a fold restart turns into an output token (4.3), which the bound learns from the events as they
come. The engine loop stops a run at this bound; the monitor judges LIVE-1 by it.

Only a preemption after progress earns its recompute: one with no output token and no KV beyond
any request's earlier most since the same request's last preemption is thrash (LIVE-3). Were it
paid for, a target that preempts and re-admits a request forever would push the bound ahead of
every iteration, and the run, with kvsched waiting on it, would never end. Progress is finite
(every output token once, every request's KV up to its length), so the bound is too.
"""

from __future__ import annotations

from collections import Counter

from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload

from .restarts import Restarts


class RunBound:
    """The last iteration by which a correct target with these declarations has drained."""

    def __init__(self, workload: Workload, properties: TargetProperties | None = None) -> None:
        self.properties = properties or TargetProperties()
        requests = workload.requests
        self.value = max((r.arrival for r in requests), default=0) + sum(
            r.output_tokens + self.chunks(r.prompt_tokens) for r in requests
        )
        self._restarts = Restarts(self.properties)
        for request in requests:
            self._restarts.arrive(request.id, request.prompt_tokens)
        self._progress = 0
        self._most: Counter[str] = Counter()
        self._stamp: dict[str, int] = {}  # progress at each request's latest preemption

    def chunks(self, tokens: int) -> int:
        """Iterations a chunked prefill of ``tokens`` may take beyond the lesson's."""
        budget = self.properties.token_budget
        return -(-tokens // budget) if self.properties.chunked_prefill and budget else 0

    def observe(self, event: IterationEvent) -> None:
        """Grow the bound by the recompute each of ``event``'s preemptions makes necessary."""
        if event.computed is None:
            return
        restarts = self._restarts
        for rid in event.preempted:
            lost, moved = restarts.preempt(rid)
            before = self._stamp.get(rid)
            self._stamp[rid] = self._progress
            if before != self._progress:
                self.value += self.chunks(lost) + moved
        for rid in event.admitted:
            restarts.admit(rid)
        restarts.step(event.computed, event.cached, event.decoded)
        self._progress += len(event.decoded)
        for rid in event.computed:
            kv = restarts.kv[rid]
            if kv > self._most[rid]:
                self._progress += kv - self._most[rid]
                self._most[rid] = kv
        for rid in event.finished:
            restarts.finish(rid)
