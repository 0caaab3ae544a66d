"""Time and memory of the reference engine loop, of the event-jumping replays and of the command.

Information, not a gate: on shared cores these figures move by tens of percent from run to run,
so ``kvsched bench`` reports them and gates only on the deterministic figures (teaching.py,
families.py). The workload shape is ``families.SCALE``: batch limit 256, mean output about 200
tokens, Poisson arrivals at 95% of the slots' rate, a pool that never binds. A kvsched without
the replay (the base of an old comparison) skips them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import ClassVar

from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.spec.workload import Workload, workload_to_json

families: ModuleType | None
fastpath: ModuleType | None
engine_fastpath: ModuleType | None
try:
    from kvsched.reference import families, fastpath
except ImportError:  # a base commit older than the replay: these benchmarks are skipped there
    families = fastpath = None
try:
    from kvsched.reference import engine_fastpath
except ImportError:  # older than the engine scheduler's batched replay
    engine_fastpath = None

SEED = 0
STEPPED_SIZE = 500
"""Requests in the workload both implementations run: about 1.5 s for the stepped loop."""
SCALE_SIZE = 1_000_000
COMMAND_SIZE = 10_000
ENGINE_SIZE = 400
"""Requests the engine scheduler's stepped loop runs: about 500 iterations of up to 256 running
requests, seconds for each design."""


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


class ScaleCommand:
    """``kvsched replay family:scale:1000000`` without a timeline, as a shell runs it: the peak
    resident memory of that process, read from the kernel's accounting of the child (wait4).

    The whole command, generating the requests included; asv's own ``peakmem_`` would measure
    the benchmark's process, not the command's.
    """

    params: ClassVar[list[str]] = ["table", "json"]
    param_names = ("format",)
    timeout = 600
    number = 1
    repeat = 1
    rounds = 1
    warmup_time = 0.0

    def setup(self, output: str) -> None:
        if fastpath is None or not hasattr(fastpath, "replay_columns"):
            raise NotImplementedError("this kvsched reads a replay's requests as objects")

    def track_peak_bytes(self, output: str) -> int:
        return _command_peak(["--format", output] if output == "json" else ["--timeline", "none"])

    track_peak_bytes.unit = "bytes"  # type: ignore[attr-defined]


class EngineReplay:
    """The engine scheduler's stepped loop (engine.run + compute_metrics) against its batched
    replay (reference/engine_fastpath.py), same workload, ``families.SCALE``: a pool that never
    binds, so every design takes the replay."""

    params: ClassVar[list[str]] = ["vllm-v1", "nano", "nano-classic", "continuous", "static"]
    param_names = ("config",)
    timeout = 600
    number = 1
    repeat = 1
    rounds = 1
    warmup_time = 0.0
    workload: Workload

    def setup(self, config: str) -> None:
        if engine_fastpath is None:
            raise NotImplementedError("this kvsched has no batched replay of the engine scheduler")
        self.workload = _scale_workload(ENGINE_SIZE)

    def track_speedup(self, config: str) -> float:
        """Stepped time over replay time, measured in one run: one stepped run, the best of
        three replays. The replay must have run (not fallen back) and agree."""
        assert engine_fastpath is not None  # setup has checked
        from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler

        design = CONFIGS[config]
        factory = EngineScheduler.configured(design)
        start = time.perf_counter()
        stepped = compute_metrics(
            self.workload, run(self.workload, factory, properties=design.properties()).events
        )
        stepped_time = time.perf_counter() - start
        replayed, fast = engine_fastpath.engine_metrics(self.workload, design)
        assert fast and replayed == stepped, "the batched replay fell back or disagreed"
        return stepped_time / _best_of(
            3, lambda: engine_fastpath.engine_replay(self.workload, design)
        )

    track_speedup.unit = "ratio"  # type: ignore[attr-defined]


def _command_peak(options: list[str]) -> int:
    """Peak resident bytes of ``kvsched replay family:scale:SCALE_SIZE`` with ``options``."""
    spec = f"family:scale:{SCALE_SIZE}:{SEED}"
    command = [sys.executable, "-m", "kvsched", "replay", spec, *options]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, command)
    return usage.ru_maxrss * 1024  # kilobytes on Linux


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
