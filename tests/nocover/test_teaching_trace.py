"""The reconstructed teaching trace reproduces the lesson (spec/traces/README.md).

Every figure is computed by the reference from spec/traces/teaching.json and compared with the
lesson's published table (kvsched.spec.teaching.PUBLISHED) as the lesson rounds it, P95 waits
under the convention the trace declares (``lower``). Under ``linear`` no workload meets them all:
that proof is kept and run here too.
"""

import json
import random
import subprocess
import sys

import pytest

from kvsched.checks.proofs.teaching import model as teaching_model
from kvsched.checks.proofs.teaching import reconstruct as teaching_trace
from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.spec.teaching import (
    LESSON_PERCENTILE_METHOD,
    PUBLISHED,
    STORYBOARD_A_FINISHES,
    STORYBOARD_D_JOINS_CONTINUOUS,
    STORYBOARD_FIRST_BATCH,
    STORYBOARD_FIRST_BATCH_PAGES,
    load_teaching_trace,
)
from kvsched.spec.workload import Limits

TRACE = load_teaching_trace()
RUNS = {policy: run(TRACE, scheduler) for policy, scheduler in POLICIES.items()}
METRICS = {policy: compute_metrics(TRACE, r.events) for policy, r in RUNS.items()}


def test_shape_of_the_lesson() -> None:
    assert [r.id for r in TRACE.requests] == list("abcdefghi")
    assert TRACE.limits == Limits(batch_limit=3, page_size=16, pool_pages=64)
    assert len({r.prompt_tokens for r in TRACE.requests}) > 1
    assert len({r.output_tokens for r in TRACE.requests}) > 1


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_iterations_and_utilization_match_the_lesson(policy: str) -> None:
    metrics, published = METRICS[policy], PUBLISHED[policy]
    assert metrics.iterations == published.iterations
    assert round(100 * metrics.utilization) == published.utilization_percent


def test_the_trace_declares_the_lessons_percentile_convention() -> None:
    assert TRACE.percentile_method == LESSON_PERCENTILE_METHOD == "lower"


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_p95_waits_match_the_lesson_exactly(policy: str) -> None:
    # lower: the second-largest of 9 waits, sorted[floor(8 x 0.95)], an integer
    assert METRICS[policy].p95_wait == PUBLISHED[policy].p95_wait
    waits = sorted(METRICS[policy].waits.values())
    assert METRICS[policy].p95_wait == waits[7]


def test_under_linear_the_static_p95_wait_misses() -> None:
    linear = compute_metrics(TRACE, RUNS["static"].events, "linear")
    assert round(linear.p95_wait) != PUBLISHED["static"].p95_wait


def test_storyboard() -> None:
    for policy, result in RUNS.items():
        first = result.events[0]
        assert first.admitted == STORYBOARD_FIRST_BATCH, policy
        assert first.pages_in_use == STORYBOARD_FIRST_BATCH_PAGES, policy
        a_done = result.events[STORYBOARD_A_FINISHES - 1]
        assert a_done.finished[:1] == ("a",) and "d" in a_done.waiting, policy
    static_15 = RUNS["static"].events[STORYBOARD_A_FINISHES]
    assert "a" not in static_15.active and "d" in static_15.waiting  # a's slot idles
    assert len(static_15.active) < TRACE.limits.batch_limit
    continuous_15 = RUNS["continuous"].events[STORYBOARD_D_JOINS_CONTINUOUS - 1]
    assert continuous_15.admitted == ("d",)
    assert continuous_15.active == ("b", "c", "d")  # d takes the slot a left


@pytest.mark.parametrize("question", teaching_trace.QUESTIONS, ids=lambda q: q.text)
def test_no_workload_meets_everything_under_linear(question: teaching_trace.Question) -> None:
    assert question.method == "linear"
    assert teaching_trace.ask(question).verdict == "unsat"


def test_the_shipped_trace_meets_everything_under_lower_and_not_under_linear() -> None:
    """The questions are not vacuous: the same constraints hold for the trace under lower."""
    import z3

    for method, expected in (("lower", z3.sat), ("linear", z3.unsat)):
        model = teaching_model.TeachingModel(method=method)
        model.pin(TRACE)
        model.solver.add(*teaching_trace.everything(model))
        assert model.solver.check() == expected, method


@pytest.mark.slow
def test_which_conventions_reach_the_figures() -> None:
    """spec/traces/README.md's table: which of numpy's methods can meet the lesson, proved."""
    verdicts = {methods[0]: answer.verdict for methods, answer in teaching_trace.conventions()}
    assert verdicts == {
        "linear": "unsat",
        "lower": "sat",
        "higher": "unsat",
        "midpoint": "sat",
        "interpolated_inverted_cdf": "sat",
    }


def test_p95_weights_are_numpys() -> None:
    from fractions import Fraction

    assert teaching_model.p95_weights("linear") == (Fraction(2, 5), Fraction(3, 5))
    assert teaching_model.p95_weights("lower") == (1, 0)
    assert teaching_model.p95_weights("nearest") == (0, 1)


def test_the_search_finds_the_shipped_trace_again() -> None:
    found = teaching_trace.closest()
    assert found is not None
    assert found == TRACE


def test_closed_forms_agree_with_the_reference() -> None:
    """The Z3 encoding of both schedules equals the reference engine on random workloads."""
    import z3

    rng = random.Random(20261129)
    for _ in range(25):
        arrivals = sorted(rng.randint(0, 40) for _ in teaching_model.NAMES)
        outputs = [rng.randint(1, 30) for _ in teaching_model.NAMES]
        workload = teaching_trace.build_workload(arrivals, outputs)
        model = teaching_model.TeachingModel()
        model.pin(workload)
        assert model.solver.check() == z3.sat
        solution = model.solver.model()
        for policy, scheduler in POLICIES.items():
            events = run(workload, scheduler).events
            starts = {rid: e.iteration for e in events for rid in e.admitted}
            metrics = compute_metrics(workload, events)
            schedule = model.schedules[policy]
            assert [solution.eval(s).as_long() for s in schedule.starts] == [
                starts[x] for x in teaching_model.NAMES
            ]
            assert solution.eval(schedule.iterations).as_long() == metrics.iterations
            assert solution.eval(schedule.busy_iterations).as_long() == metrics.busy_iterations
            linear = compute_metrics(workload, events, "linear").p95_wait
            assert solution.eval(schedule.p95_times_5).as_long() / 5 == pytest.approx(linear)
            lower = compute_metrics(workload, events, "lower").p95_wait
            assert solution.eval(schedule.second_wait).as_long() == lower


def test_replay_json_matches_the_published_figures() -> None:
    output = subprocess.run(
        [sys.executable, "-m", "kvsched", "replay", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    figures = json.loads(output)
    assert set(figures) == {"static", "continuous"}
    for policy, published in PUBLISHED.items():
        assert figures[policy]["iterations"] == published.iterations
        assert round(100 * figures[policy]["utilization"]) == published.utilization_percent
        assert figures[policy]["peak_pages"] == METRICS[policy].peak_pages
        assert figures[policy]["p95_wait"] == published.p95_wait
        assert figures[policy]["percentile_method"] == "lower"
