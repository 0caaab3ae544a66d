"""Every check of a scheduler class runs ten thousand requests: a leak that starts only after
thousands of finished requests is caught by the default check's fixed runs, not left to luck."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.search.runs import PROFILE_RUNS
from kvsched.checks.targets.load import SchedulerTarget
from kvsched.reference import ContinuousScheduler
from kvsched.reference.families import check_workloads, long_run, long_run_source
from kvsched.spec.protocol import ModelOutput, StepOutcome

FIXED_ONLY = CheckOptions(hypothesis=False, proof_requests=0)
LEAKS_AFTER = 5_000


class LeaksAfterThousands(ContinuousScheduler):
    """Right for the first 5,000 finished requests; after them, each finish keeps its last page
    out of the pool while it reports the whole table freed."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.finished = 0

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        if self.finished < LEAKS_AFTER:
            outcome = super().update_from_output(output)
            self.finished += len(outcome.finished)
            return outcome
        pool_free = self.pool.free

        def keep_one(owner: str, pages: tuple[int, ...]) -> None:
            pool_free(owner, pages[:-1])

        self.pool.free = keep_one  # type: ignore[method-assign]
        try:
            return super().update_from_output(output)
        finally:
            self.pool.free = pool_free  # type: ignore[method-assign]


def test_every_profile_runs_ten_thousand_requests_or_more() -> None:
    assert all(runs.long_run >= 10_000 for runs in PROFILE_RUNS.values())
    workload = long_run(PROFILE_RUNS["ci"].long_run)
    assert len(workload.requests) == 10_000
    # The families stop at a tenth of that: the long run is what reaches thousands.
    assert max(len(w.requests) for w in check_workloads()) <= 1_000


def test_a_leak_after_5000_finished_requests_is_caught_on_the_long_run() -> None:
    target = SchedulerTarget("leaks", LeaksAfterThousands, "continuous", None)
    [verdict] = check_target(target, FIXED_ONLY).verdicts
    assert verdict.finding is not None, "the leak after 5,000 requests passed"
    assert verdict.finding.invariant == "PAGE-3"
    assert verdict.counterexample is not None
    assert verdict.counterexample.found_by.startswith(long_run_source(10_000))
    assert verdict.evidence.coverage.requests == 10_000


def test_the_same_class_passes_with_the_long_run_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes the previous test fail is the long run: the other fixed runs miss the leak."""
    monkeypatch.setitem(PROFILE_RUNS, "ci", replace(PROFILE_RUNS["ci"], long_run=0))
    target = SchedulerTarget("leaks", LeaksAfterThousands, "continuous", None)
    [verdict] = check_target(target, FIXED_ONLY).verdicts
    assert verdict.finding is None


def test_a_small_declared_budget_gets_arrivals_it_can_serve() -> None:
    """At the slots' rate a design serving 8 tokens an iteration would queue thousands; its long
    run arrives at what its budget serves, so its queue stays short and its cost linear."""
    fast, slow = long_run(10_000), long_run(10_000, token_budget=8)
    assert [r.prompt_tokens for r in fast.requests] == [r.prompt_tokens for r in slow.requests]
    span_fast, span_slow = fast.requests[-1].arrival, slow.requests[-1].arrival
    assert span_slow > 20 * span_fast
    # 8 tokens serve about 0.42 brief requests an iteration: arrivals come at 95% of that.
    assert 0.35 < 10_000 / span_slow < 0.42
    assert long_run(10_000, token_budget=4096) == fast  # a budget that keeps up changes nothing
