"""CPU time of a scheduler class's default check as ``kvsched check`` runs it, both processes
counted: kvsched's and the host's.

``kvsched check kvsched.reference.engine_scheduler:VLLMV1Scheduler``, the engine scheduler as
vLLM v1 is designed, from a fresh interpreter, measured as :mod:`benchmarks.learner` measures a
learner's (the host without a sandbox, so that its CPU time is counted). ``check.py`` runs the
same check in process, without the host and its round trips. Information, not a gate.
"""

from __future__ import annotations

from benchmarks.learner import check_cpu_seconds

TARGET = "kvsched.reference.engine_scheduler:VLLMV1Scheduler"


class ClassCheck:
    """The default check of an engine-like class, hosted."""

    timeout = 600
    number = 1
    repeat = 1

    def track_cpu_seconds(self) -> float:
        return check_cpu_seconds(TARGET)

    track_cpu_seconds.unit = "seconds"  # type: ignore[attr-defined]
