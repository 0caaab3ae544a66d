"""A shortest-first continuous-batching scheduler, behind the lesson protocol.

Continuous batching with the lesson's peak-page admission, but the waiting queue is ordered by
prompt length (ties by arrival): the classic shortest-job-first heuristic for mean latency. It
declares ``order="shortest-first"`` and reports its queue, so the monitor checks admissions
against that order instead of FCFS, and work conservation (BATCH-3) against its own head.
"""

from __future__ import annotations

from dataclasses import replace

from kvsched.reference import ContinuousScheduler
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Request


class ShortestFirst(ContinuousScheduler):
    properties = TargetProperties(policy="continuous", order="shortest-first")

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)
        ordered = sorted(self.waiting, key=lambda r: r.prompt_tokens)  # stable: ties by arrival
        self.waiting.clear()
        self.waiting.extend(ordered)

    def schedule(self) -> ScheduledBatch:
        # The reference's admission loop serves the queue's head; only the order differs.
        batch = super().schedule()
        return replace(batch, waiting=tuple(r.id for r in self.waiting))
