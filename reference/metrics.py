"""Run metrics, each computed exactly as spec/semantics.md section 7 defines it.

Every metric is a pure function of the workload and the run's events, so a recorded event log
from any engine yields the same numbers as a live run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kvsched.spec.events import IterationEvent
from kvsched.spec.vocabulary import DEFAULT_PERCENTILE_METHOD, PercentileMethod
from kvsched.spec.workload import Workload


@dataclass(frozen=True)
class RunMetrics:
    """Section 7's metrics of one run.

    On a run that did not drain (a scheduler under test that crashed or starved a request), the
    waits cover only the requests that were admitted: a partial run's figures flatter it, so
    whoever compares runs must check ``Run.drained`` and ``Run.fault`` first (the report's gate
    does).
    """

    iterations: int
    """The last iteration in which any request was active (7.1)."""
    busy_iterations: int
    """Iterations with at least one active request (7.2)."""
    tokens: int
    """Output tokens produced over the run."""
    utilization: float
    """tokens / (batch_limit x busy_iterations), a fraction (7.2)."""
    waits: Mapping[str, int]
    """Per request: iterations between arrival and the start of its first iteration (7.3)."""
    p50_wait: float
    p95_wait: float
    percentile_method: PercentileMethod
    """The convention P50 and P95 wait were taken under (7.4), the workload's unless overridden."""
    max_wait: int
    mean_wait: float
    peak_pages: int
    """Most pages in use in any one iteration (7.5)."""
    peak_wasted_slots: int
    """Most allocated-but-unfilled token slots in any one iteration (7.6)."""
    mean_wasted_slots: float
    """Wasted slots averaged over busy iterations (7.6)."""

    def as_dict(self) -> dict[str, object]:
        """Every metric by name, waits included, as ``kvsched replay --format json`` prints it."""
        return {
            "iterations": self.iterations,
            "busy_iterations": self.busy_iterations,
            "tokens": self.tokens,
            "utilization": self.utilization,
            "p50_wait": self.p50_wait,
            "p95_wait": self.p95_wait,
            "percentile_method": self.percentile_method,
            "max_wait": self.max_wait,
            "mean_wait": self.mean_wait,
            "peak_pages": self.peak_pages,
            "peak_wasted_slots": self.peak_wasted_slots,
            "mean_wasted_slots": self.mean_wasted_slots,
            "waits": dict(self.waits),
        }


def percentile(
    values: Sequence[float], p: float, method: PercentileMethod = DEFAULT_PERCENTILE_METHOD
) -> float:
    """The p-th percentile under ``method``, one of numpy's method names (7.4).

    The default, ``linear``, is Hyndman and Fan's type 7, numpy's default and what vLLM's and
    SGLang's serving benchmarks report: rank ``(n - 1) * p / 100`` of the sorted values,
    interpolated. ``lower`` takes the value at that rank rounded down.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"p must be within [0, 100], got {p}")
    # Imported here, not with the module: checking a log reaches this module but needs no
    # percentile, and importing numpy takes 75 ms and starts OpenBLAS's threads, whose spinning
    # counts against the check's CPU time.
    import numpy as np

    return float(np.percentile(values, p, method=method))


def admission_iterations(events: Iterable[IterationEvent]) -> dict[str, int]:
    """The iteration in which each request was first admitted."""
    admitted: dict[str, int] = {}
    for event in events:
        for request_id in event.admitted:
            admitted.setdefault(request_id, event.iteration)
    return admitted


def compute_metrics(
    workload: Workload,
    events: Sequence[IterationEvent],
    percentile_method: PercentileMethod | None = None,
) -> RunMetrics:
    """All of section 7 for one run; percentiles under the workload's declared method unless
    ``percentile_method`` overrides it."""
    method = percentile_method or workload.percentile_method
    limits = workload.limits
    admitted = admission_iterations(events)
    waits = {r.id: admitted[r.id] - 1 - r.arrival for r in workload.requests if r.id in admitted}
    busy = [e for e in events if e.active]
    tokens = sum(len(e.decoded) for e in events)
    prompts = {r.id: r.prompt_tokens for r in workload.requests}
    generated: dict[str, int] = {}
    peak_wasted = 0
    total_wasted = 0
    for event in events:
        for request_id in event.decoded:
            generated[request_id] = generated.get(request_id, 0) + 1
        wasted = 0
        for request_id, table in event.page_tables.items():
            held = prompts.get(request_id, 0) + generated.get(request_id, 0)
            wasted += max(len(table) * limits.page_size - held, 0)
        peak_wasted = max(peak_wasted, wasted)
        total_wasted += wasted
    wait_values = list(waits.values()) or [0]
    return RunMetrics(
        iterations=max((e.iteration for e in busy), default=0),
        busy_iterations=len(busy),
        tokens=tokens,
        utilization=tokens / (limits.batch_limit * len(busy)) if busy else 0.0,
        waits=waits,
        p50_wait=percentile(wait_values, 50, method),
        p95_wait=percentile(wait_values, 95, method),
        percentile_method=method,
        max_wait=max(wait_values),
        mean_wait=sum(wait_values) / len(wait_values),
        peak_pages=max((e.pages_in_use for e in events), default=0),
        peak_wasted_slots=peak_wasted,
        mean_wasted_slots=total_wasted / len(busy) if busy else 0.0,
    )
