"""The price of running a target in its own process: scheduler calls per second over the wire.

Information, not a gate (times on shared cores move by tens of percent). ``kvsched check``
drives every target through a host process (checks/targets/): each protocol call is one round
trip of framed msgpack over a pipe. These benchmarks run the teaching trace through the reference
continuous scheduler hosted that way, and in this process, and report calls per second of each.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from kvsched.reference import ContinuousScheduler, run
from kvsched.spec.teaching import load_teaching_trace

RUNS = 20


class _Counting:
    """A scheduler that counts the protocol calls it forwards."""

    calls = 0

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def add_request(self, request: Any) -> None:
        _Counting.calls += 1
        self._inner.add_request(request)

    def schedule(self) -> Any:
        _Counting.calls += 1
        return self._inner.schedule()

    def update_from_output(self, output: Any) -> Any:
        _Counting.calls += 1
        return self._inner.update_from_output(output)


def _calls_per_second(factory: Any) -> float:
    workload = load_teaching_trace()
    _Counting.calls = 0
    started = time.perf_counter()
    for _ in range(RUNS):
        if not run(workload, lambda limits: _Counting(factory(limits)), "continuous").drained:
            raise RuntimeError("the teaching trace did not drain")
    return _Counting.calls / (time.perf_counter() - started)


class HostBoundary:
    """The teaching trace, 20 runs, through the reference hosted in another process."""

    timeout = 300
    unit = "calls/s"

    def setup(self) -> None:
        try:
            remote = importlib.import_module("kvsched.checks.targets.remote")
            process = importlib.import_module("kvsched.checks.targets.confinement")
        except ImportError as error:
            raise NotImplementedError(f"no host process in this kvsched: {error}") from None
        spec = "kvsched.reference:ContinuousScheduler"
        self.remote = remote.RemoteTarget(spec, process.Confinement())
        self.factory = self.remote.load().factory

    def teardown(self) -> None:
        self.remote.close()

    def track_hosted_calls_per_second(self) -> float:
        return _calls_per_second(self.factory)

    def track_in_process_calls_per_second(self) -> float:
        return _calls_per_second(ContinuousScheduler)
