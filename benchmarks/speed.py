"""Time and memory of the reference engine loop, of the event-jumping replay and of the command.

Information, not a gate: on shared cores these figures move by tens of percent from run to run,
so ``kvsched bench`` reports them and gates only on the deterministic figures (teaching.py,
families.py). The workload shape is ``families.SCALE``: batch limit 256, mean output about 200
tokens, Poisson arrivals at 95% of the slots' rate, a pool that never binds. A kvsched without
the replay (the base of an old comparison) skips them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.spec.workload import Workload, workload_to_json

families: ModuleType | None
fastpath: ModuleType | None
try:
    from kvsched.reference import families, fastpath
except ImportError:  # a base commit older than the replay: these benchmarks are skipped there
    families = fastpath = None

SEED = 0
STEPPED_SIZE = 500
"""Requests in the workload both implementations run: about 1.5 s for the stepped loop."""
SCALE_SIZE = 1_000_000
COMMAND_SIZE = 10_000


class EngineLoop:
    """The stepped loop (engine.run + compute_metrics) against the replay, same workload."""

    params = sorted(POLICIES)
    param_names = ("policy",)
    timeout = 300
    # A stepped sample takes seconds: between 2 and 5 samples, in one process, within ~10 s.
    rounds = 1
    repeat = (2, 5, 10.0)
    workload: Workload

    def setup(self, policy: str) -> None:
        self.workload = _scale_workload(STEPPED_SIZE)

    def time_stepped(self, policy: str) -> None:
        compute_metrics(self.workload, run(self.workload, POLICIES[policy]).events)

    def peakmem_stepped(self, policy: str) -> None:
        compute_metrics(self.workload, run(self.workload, POLICIES[policy]).events)

    def time_replay(self, policy: str) -> None:
        _replay(self.workload, policy)

    def track_speedup(self, policy: str) -> float:
        """Stepped-loop time over replay time; each the best of three runs."""
        stepped = _best_of(3, lambda: self.time_stepped(policy))
        fast = _best_of(3, lambda: self.time_replay(policy))
        return stepped / fast

    track_speedup.unit = "ratio"  # type: ignore[attr-defined]


class ScaleReplay:
    """The large replay: 1,000,000 requests, batch limit 256."""

    params = sorted(POLICIES)
    param_names = ("policy",)
    timeout = 600
    # One sample in one process: a sample takes seconds, and generating the workload as long.
    number = 1
    repeat = 1
    rounds = 1
    warmup_time = 0.0
    workload: Workload

    def setup(self, policy: str) -> None:
        self.workload = _scale_workload(SCALE_SIZE)

    def time_replay(self, policy: str) -> None:
        _replay(self.workload, policy)

    def peakmem_replay(self, policy: str) -> None:
        """Peak resident memory of the process: the workload's requests plus the replay."""
        _replay(self.workload, policy)


class ReplayCommand:
    """``kvsched replay FILE --timeline none`` on 10,000 requests, as a shell runs it.

    The whole command in a fresh interpreter: start-up, imports, loading and validating the file,
    both policies and the table. Without a timeline it takes the event-jumping replay, so the
    target is under a second; a kvsched whose replay steps every iteration takes minutes here.
    """

    timeout = 600
    number = 1
    repeat = (2, 5, 20.0)
    rounds = 1
    warmup_time = 0.0
    folder: Path

    def setup(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="kvsched-bench-"))
        workload = _scale_workload(COMMAND_SIZE)
        (self.folder / "workload.json").write_text(json.dumps(workload_to_json(workload)))

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_replay_command(self) -> None:
        command = [sys.executable, "-m", "kvsched", "replay", str(self.folder / "workload.json")]
        subprocess.run([*command, "--timeline", "none"], check=True, stdout=subprocess.DEVNULL)


def _scale_workload(size: int) -> Workload:
    if families is None or fastpath is None:
        raise NotImplementedError("this kvsched has no workload families or replay")
    workload: Workload = families.generate(families.SCALE, size, SEED)
    return workload


def _replay(workload: Workload, policy: str) -> None:
    assert fastpath is not None  # setup has checked
    fastpath.replay(workload, policy)


def _best_of(times: int, job: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        job()
        best = min(best, time.perf_counter() - start)
    return best
