"""BATCH-6, where a target declares ``serves_running``: a request of the batch left out of an
iteration while the requests that ran before left room in the token budget."""

from __future__ import annotations

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload

WORKLOAD = Workload("served", Limits(4, 4, 16), tuple(Request(r, 0, 4, 4) for r in "abcd"))
SERVES = TargetProperties(
    policy="continuous", admission="lazy", token_budget=3, chunked_prefill=True,
    preemption=True, serves_running=True,
)  # fmt: skip


def _event(active: str, admitted: str = "", finished: str = "") -> IterationEvent:
    return IterationEvent(
        2, (), tuple(admitted), tuple(active), (), tuple(finished), {}, {}, {}, 0, (), ()
    )


def _served(
    properties: TargetProperties, event: IterationEvent, computed: dict[str, int]
) -> Finding | None:
    monitor = Monitor(WORKLOAD, "continuous", properties)
    return monitor.batch.check_served(2, event, computed)


def test_a_request_left_out_with_budget_to_spare_is_batch_6() -> None:
    finding = _served(SERVES, _event("abc"), {"a": 1, "b": 1})
    assert finding is not None and finding.invariant == "BATCH-6"
    assert finding.requests == ("c",)
    assert "left 1 of the 3-token budget" in finding.message


def test_a_request_left_out_once_the_batch_spent_the_budget_is_not() -> None:
    assert _served(SERVES, _event("abcd"), {"a": 1, "b": 1, "c": 1}) is None


def test_admissions_do_not_spend_the_batchs_budget() -> None:
    # The admitted request computed after the batch: the budget it took was the batch's first.
    finding = _served(SERVES, _event("abc", admitted="c"), {"a": 1, "c": 2})
    assert finding is not None and finding.requests == ("b",)


def test_a_request_finishing_without_compute_and_an_undeclared_target_are_not_judged() -> None:
    assert _served(SERVES, _event("ab", finished="b"), {"a": 1}) is None
    undeclared = TargetProperties(
        policy="continuous", admission="lazy", token_budget=3, chunked_prefill=True,
        preemption=True,
    )  # fmt: skip
    assert _served(undeclared, _event("abc"), {"a": 1}) is None
