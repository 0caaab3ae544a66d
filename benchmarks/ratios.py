"""Speed as ratios of two runs measured in the same process, one after the other.

A ratio cancels most of what moves an absolute time on shared cores (the machine, its load, the
interpreter), so it follows the code from commit to commit. Times are process CPU seconds
(``time.process_time``, as in eventlog.py); each side of a ratio is the best of its runs, the two
sides alternating. Lower is better, as asv compare reads a change. Information, not a gate.

:class:`EngineSchedulerLoop`: the engine scheduler as vLLM v1 is designed (token budget 512,
chunked prefill, preemption, prefix caching, the null block) through the stepped loop on 10^4
requests, three in four of them in one of three prefix groups, 64 slots, a pool of two fifths of
their peak
(:func:`benchmarks.logs.engine_requests`), against the lesson's continuous scheduler through the
same loop on the same workload.

:class:`MonitorOverhead`: a reference scheduler's stepped run with the runtime monitor checking
every event, as ``kvsched check`` judges a target (the run, then
:func:`kvsched.checks.monitor.runtime.watch_run`), against the same run unjudged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.logs import ENGINE, engine_requests
from kvsched.reference import POLICIES, ContinuousScheduler, run
from kvsched.reference.engine_scheduler import EngineScheduler
from kvsched.spec.workload import Workload

SEED = 0
ENGINE_REQUESTS = 10_000
MONITOR_FAMILY, MONITOR_REQUESTS = "poisson-long-tight", 1_000


class EngineSchedulerLoop:
    """CPU seconds per iteration of the engine scheduler's stepped loop over those of the
    continuous scheduler, the simplest reference scheduler, on the same 10^4 requests.

    Both go through the same engine loop, which validates and records every iteration, so the
    ratio is what an iteration of the engine scheduler costs next to one of the lesson's: 1 would
    mean its token budget, lazy pages, preemption and prefix cache cost nothing over continuous
    batching. The engine scheduler runs fewer iterations (it admits by pages taken, not by
    peak), so the ratio compares rates, not run times.
    """

    timeout = 600
    number = 1
    repeat = 1
    rounds = 1
    workload: Workload

    def setup(self) -> None:
        self.workload = engine_requests(ENGINE_REQUESTS)

    def track_cost_over_continuous(self) -> float:
        target = EngineScheduler.configured(ENGINE)
        engine, lesson = _alternate(
            2,
            lambda: len(run(self.workload, target).events),
            lambda: len(run(self.workload, ContinuousScheduler).events),
        )
        return lesson / engine  # iterations per second: the costs' ratio, inverted

    track_cost_over_continuous.unit = "ratio"  # type: ignore[attr-defined]


class MonitorOverhead:
    """CPU time of a run judged event by event over that of the same run alone: 1,000 requests
    of poisson-long-tight (long outputs over a tight pool, so the page rules bind), each side the
    best of three. The target is at most 1.5."""

    params = sorted(POLICIES)
    param_names = ("policy",)
    timeout = 600
    number = 1
    repeat = 1
    rounds = 1
    workload: Workload
    watch_run: Any

    def setup(self, policy: str) -> None:
        try:  # a base commit without them skips this benchmark (asv's NotImplementedError)
            from kvsched.checks.monitor.runtime import watch_run
            from kvsched.reference.families import generate
        except ImportError as error:
            raise NotImplementedError(str(error)) from None
        self.watch_run = watch_run
        self.workload = generate(MONITOR_FAMILY, MONITOR_REQUESTS, SEED)

    def track_overhead(self, policy: str) -> float:
        factory = POLICIES[policy]

        def alone() -> int:
            run(self.workload, factory)
            return 1

        def judged() -> int:
            finding, _ = self.watch_run(run(self.workload, factory))
            if finding is not None:  # timing a finding would time something else
                raise RuntimeError(f"the reference was expected to pass, got {finding}")
            return 1

        unjudged_rate, judged_rate = _alternate(3, alone, judged)
        return unjudged_rate / judged_rate  # runs per second: the times' ratio, inverted

    track_overhead.unit = "ratio"  # type: ignore[attr-defined]


def _alternate(times: int, first: Callable[[], int], second: Callable[[], int]) -> list[float]:
    """Each job's best rate (its answer, a count, per CPU second), the two run in turn."""
    best = [0.0, 0.0]
    for _ in range(times):
        for side, job in enumerate((first, second)):
            started = time.process_time()
            count = job()
            best[side] = max(best[side], count / (time.process_time() - started))
    return best
