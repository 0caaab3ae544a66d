"""What ``kvsched check`` of a correct engine-like class costs by default, in CPU time.

:class:`DefaultCheck`: the whole default check (the teaching trace, the seeded families, a ci
Hypothesis search) of the engine scheduler as vLLM v1 is designed
(``kvsched.reference.engine_scheduler:VLLMV1Scheduler``), in this process, as
:func:`kvsched.checks.judge.target.check_target` runs it: CPU seconds (``track_cpu_seconds``),
and, in the same run, the same over the CPU time of its fixed workloads alone, each run through
the engine once unjudged (``track_over_fixed_runs``), which cancels most of what the machine and
its load do to the seconds. The hosted process ``kvsched check`` adds (the sandbox, the calls
across it) is ``boundary.py``'s. Lower is better; information, not a gate.
"""

from __future__ import annotations

import time

from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.targets.load import load_target
from kvsched.reference import run
from kvsched.reference.families import check_workloads
from kvsched.spec.teaching import load_teaching_trace

TARGET = "kvsched.reference.engine_scheduler:VLLMV1Scheduler"


class DefaultCheck:
    """The default check of an engine-like class, best of two, against its fixed runs alone."""

    timeout = 600
    number = 1
    repeat = 1
    rounds = 1

    def setup(self) -> None:
        self.target = load_target(TARGET)
        self.fixed = (load_teaching_trace(), *check_workloads())

    def _check(self) -> float:
        started = time.process_time()
        report = check_target(self.target, CheckOptions())
        seconds = time.process_time() - started
        if any(v.finding is not None for v in report.verdicts):  # timing a finding times else
            raise RuntimeError(f"{TARGET} was expected to pass: {report.verdicts}")
        return seconds

    def _fixed_runs(self) -> float:
        factory = self.target.factory  # type: ignore[attr-defined]
        started = time.process_time()
        for workload in self.fixed:
            run(workload, factory, factory.policy, properties=factory.properties)
        return time.process_time() - started

    def track_cpu_seconds(self) -> float:
        return min(self._check() for _ in range(2))

    track_cpu_seconds.unit = "seconds"  # type: ignore[attr-defined]

    def track_over_fixed_runs(self) -> float:
        checks, fixed = [], []
        for _ in range(2):  # alternating, so both sides see the same load
            checks.append(self._check())
            fixed.append(self._fixed_runs())
        return min(checks) / min(fixed)

    track_over_fixed_runs.unit = "ratio"  # type: ignore[attr-defined]
