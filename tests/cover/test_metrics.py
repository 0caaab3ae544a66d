"""Metrics as spec/semantics.md section 7 defines them, on hand-computed runs."""

import pytest

from kvsched.reference import POLICIES, compute_metrics, percentile, run
from kvsched.spec.workload import Limits, Request, Workload


def test_percentile_is_linear_between_ranks_as_numpy_default() -> None:
    values = list(range(1, 11))
    assert percentile(values, 95) == pytest.approx(9.55)  # numpy.percentile(1..10, 95)
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile(values, 50) == pytest.approx(5.5)
    assert percentile([7], 95) == 7
    assert percentile([3, 1, 2], 100) == 3
    assert percentile([3, 1, 2], 0) == 1
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="within"):
        percentile([1], 101)


def two_requests(arrival_b: int) -> Workload:
    return Workload(
        "two",
        Limits(batch_limit=1, page_size=4, pool_pages=10),
        (Request("a", 0, 3, 2), Request("b", arrival_b, 0, 3)),
    )


def test_hand_computed_run() -> None:
    # a: iterations 1-2 (context 4, 5 -> 1, 2 pages); b waits for the only slot: 3-5.
    workload = two_requests(arrival_b=0)
    metrics = compute_metrics(workload, run(workload, POLICIES["continuous"]).events)
    assert metrics.iterations == 5
    assert metrics.busy_iterations == 5
    assert metrics.tokens == 5
    assert metrics.utilization == 1.0
    assert dict(metrics.waits) == {"a": 0, "b": 2}
    assert metrics.max_wait == 2
    assert metrics.p95_wait == pytest.approx(1.9)
    assert metrics.peak_pages == 2
    # wasted slots per iteration: a 0 (4 of 4), a 3 (5 of 8), b 3, b 2, b 1
    assert metrics.peak_wasted_slots == 3
    assert metrics.mean_wasted_slots == pytest.approx(9 / 5)


def test_idle_iterations_count_in_iterations_not_in_utilization() -> None:
    workload = two_requests(arrival_b=9)  # b may join from iteration 10
    metrics = compute_metrics(workload, run(workload, POLICIES["static"]).events)
    assert metrics.iterations == 12
    assert metrics.busy_iterations == 5
    assert metrics.utilization == 1.0
    assert dict(metrics.waits) == {"a": 0, "b": 0}
