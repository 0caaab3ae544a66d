"""CPU time of a learner's default check, both processes counted: kvsched's and the host's.

``kvsched check examples/learner/correct.py``, as a learner runs it (the ci profile: the teaching
trace, the seeded families at a learner's size, Hypothesis's examples under both policies, the
allocator's property), from a fresh interpreter. The host runs without a sandbox here: a
bubblewrap host is not reaped by kvsched, so its CPU time would go uncounted. Information, not
a gate (CPU time still moves by tens of percent on shared cores).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

SOLUTION = Path(__file__).resolve().parents[1] / "examples" / "learner" / "correct.py"


class LearnerCheck:
    """The default check of the lesson's correct solution."""

    timeout = 600
    number = 1
    repeat = 1

    def setup(self) -> None:
        if not SOLUTION.exists():
            raise NotImplementedError(f"{SOLUTION} is not in this checkout")

    def track_cpu_seconds(self) -> float:
        return check_cpu_seconds(str(SOLUTION))

    track_cpu_seconds.unit = "seconds"  # type: ignore[attr-defined]


def check_cpu_seconds(target: str) -> float:
    """CPU seconds of ``kvsched check TARGET`` from a fresh interpreter, kvsched's process and
    the host's together (both are reaped children of this one); the target must pass."""
    command = [sys.executable, "-m", "kvsched", "check", target, "--sandbox", "none"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:  # timing a finding times something else
        raise RuntimeError(f"the check of {target}, expected to pass, exited {result.returncode}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
