"""The iteration bound of a run, with the allowances a declared target earns (spec/semantics.md,
3.6; spec/eventlog.md, 4.2, 4.3 and 4.8).

The lesson's bound is the last arrival plus every output token. A target that chunks prefills
under a token budget earns ``ceil(prompt / budget)`` iterations per request, and
``ceil(lost / budget)`` for the KV tokens each preemption drops, one iteration per prompt token
a fold restart turns into an output token (4.3), one for an iteration that preempted and
computed nothing, and, under asynchronous scheduling, one for an iteration that computed nothing
after an update that gave pages back (they wait for the step in flight: PAGE-7), which the bound
learns from the events as they come. The engine loop stops a
run at this bound. The monitor judges LIVE-1 by its own count (checks/monitor/requests.py), which
every preemption earns, so it is never below this one: it must also read logs whose fast-path
lines make no events for a bound to learn from.

Only a preemption after progress earns its recompute (:mod:`.record`, the rule LIVE-3 judges
by): progress is finite (every output token once, every request's KV up to its length), so the
bound is too, and a target that preempts and re-admits forever cannot keep the run going.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload

from .record import Records


class RunBound:
    """The last iteration by which a correct target with these declarations has drained."""

    def __init__(self, workload: Workload, properties: TargetProperties | None = None) -> None:
        self.properties = properties or TargetProperties()
        requests = workload.requests
        self.value = max((r.arrival for r in requests), default=0) + sum(
            r.output_tokens + self.chunks(r.prompt_tokens) for r in requests
        )
        self.fenced = False
        """Under asynchronous scheduling: whether the last event's update gave pages back."""

    def chunks(self, tokens: int) -> int:
        """Iterations a chunked prefill of ``tokens`` may take beyond the lesson's: the
        declaration's rule, as the monitor's bound counts it."""
        return self.properties.prefill_iterations(tokens)

    def observe(
        self, event: IterationEvent, records: Records, restarted: Mapping[str, tuple[int, int]]
    ) -> None:
        """Grow the bound by the recompute each of ``event``'s preemptions makes necessary.
        ``records``: the run's, moved by ``event``'s schedule and tokens, its finishes not yet;
        ``restarted``: what each of its preemptions lost and moved (:meth:`Records.preempt`)."""
        if event.computed is None:
            return
        earned = False
        for rid, (lost, moved) in restarted.items():
            if not records.preempted_again(rid):
                self.value += self.chunks(lost) + moved
                earned = True
        if earned and not any(event.computed.values()):
            # A request that preempts itself ends the schedule() (vLLM's break), so the iteration
            # can compute nothing at all: every other allowance assumes it computes something.
            self.value += 1
        fenced = self.fenced
        self.fenced = False
        if self.properties.async_scheduling:
            idle = not event.preempted and not event.decoded and not any(event.computed.values())
            if fenced and idle:
                # Waiting for pages the update before gave back, which stay fenced while the
                # step in flight may write them (PAGE-7): one iteration per such update.
                self.value += 1
            if event.freed:
                held = {page for table in event.tables_after().values() for page in table}
                self.fenced = any(
                    page not in held for pages in event.freed.values() for page in pages
                )
