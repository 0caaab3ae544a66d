"""How a learner's file is searched: Hypothesis never climbs, no workload is judged twice, and
the second policy judges the workloads the first one's search drew, undrawn.

A class's search steers towards crowded runs and the corners of its design with Hypothesis's
``target()`` (checks/search/corners.py, ``aim``), and judges a workload each time Hypothesis
draws it. A learner's search does neither: each of its iterations is a round trip to the host.
These tests read what Hypothesis observed of each test case, and which workloads were run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis.internal.observability import with_observability_callback

from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.mutants.engine import V1
from kvsched.checks.search import explore
from kvsched.checks.search.explore import search
from kvsched.checks.targets.learner import LearnerSolution, learner_factory
from kvsched.checks.targets.load import LearnerTarget, load_target
from kvsched.spec.workload import Workload

CORRECT = Path(__file__).resolve().parents[2] / "examples" / "learner" / "correct.py"


def _targets(run: Any) -> Counter[str]:
    """The ``target()`` labels Hypothesis observed over the test cases ``run()`` made."""
    seen: Counter[str] = Counter()

    def count(observation: Any) -> None:
        if getattr(observation, "type", "") == "test_case":
            seen.update(f for f in observation.features if f.startswith("target:"))

    with with_observability_callback(count):
        run()
    return seen


def test_a_search_that_does_not_climb_calls_no_target() -> None:
    def searched(climb: bool) -> Any:
        return lambda: search(V1, "continuous", "ci", 3, properties=V1.properties, climb=climb)

    assert _targets(searched(climb=True))["target:active requests"] > 0  # the control
    assert not _targets(searched(climb=False))


def test_a_learners_check_searches_without_climbing() -> None:
    target = load_target(str(CORRECT))
    assert isinstance(target, LearnerTarget)
    options = CheckOptions(max_examples=3, families=False, teaching_trace=False)
    reports: list[Any] = []
    assert not _targets(lambda: reports.append(check_target(target, options)))
    (report,) = reports
    assert all(v.evidence.hypothesis_examples >= 3 for v in report.verdicts)  # with the shapes
    assert all(v.finding is None for v in report.verdicts)


def test_a_class_check_still_climbs() -> None:
    target = load_target("kvsched.reference.engine_scheduler:VLLMV1Scheduler")
    options = CheckOptions(max_examples=3, families=False, teaching_trace=False, proof_requests=0)
    assert _targets(lambda: check_target(target, options))["target:active requests"] > 0


def test_a_search_that_does_not_rerun_judges_each_workload_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = load_target(str(CORRECT))
    assert isinstance(target, LearnerTarget) and target.solution.schedule_iteration is not None
    factory = learner_factory(target.solution.schedule_iteration, "static")
    judged: list[Any] = []
    run = explore.run

    def counted(workload: Workload, *args: Any, **kwargs: Any) -> Any:
        judged.append((workload.limits, workload.requests))
        return run(workload, *args, **kwargs)

    monkeypatch.setattr(explore, "run", counted)
    again = search(factory, "static", "ci", 40, climb=False)
    assert again.clean and len(judged) > len(set(judged))  # the control: some are drawn twice
    judged.clear()
    once = search(factory, "static", "ci", 40, climb=False, rerun=False)
    assert once.clean and len(judged) == len(set(judged)) < once.examples
    # The same test cases: one drawn again counts, with its first run's verdict.
    assert once.examples == again.examples


def _schedule_iteration() -> Any:
    target = load_target(str(CORRECT))
    assert isinstance(target, LearnerTarget) and target.solution.schedule_iteration is not None
    return target.solution.schedule_iteration


# Seeded, dev's and thorough's draws are larger and slower: fewer examples show the same.
@pytest.mark.parametrize(
    ("profile", "seed", "examples"), [("ci", None, 40), ("dev", 7, 8), ("thorough", 3, 8)]
)
def test_a_second_policy_judges_the_first_searchs_workloads_as_its_own_search_would(
    monkeypatch: pytest.MonkeyPatch, profile: str, seed: int | None, examples: int
) -> None:
    correct = _schedule_iteration()
    drawn = search(
        learner_factory(correct, "static"), "static", profile, examples, seed=seed, climb=False,
        rerun=False,
    )  # fmt: skip
    assert drawn.clean and drawn.drawn
    judged: list[Any] = []
    run = explore.run

    def counted(workload: Workload, *args: Any, **kwargs: Any) -> Any:
        judged.append((workload.limits, workload.requests))
        return run(workload, *args, **kwargs)

    monkeypatch.setattr(explore, "run", counted)
    continuous = learner_factory(correct, "continuous")
    searched = search(
        continuous, "continuous", profile, examples, seed=seed, climb=False, rerun=False
    )
    drew, judged[:] = list(judged), []
    replayed = explore.replay(continuous, "continuous", drawn)
    assert replayed is not None
    assert judged == drew == [(w.limits, w.requests) for w in drawn.drawn]
    assert replayed == searched  # examples, coverage, what was excused, the workloads


def test_a_replay_stops_at_a_workload_that_breaks_an_invariant() -> None:
    drawn = search(
        learner_factory(_schedule_iteration(), "static"), "static", "ci", 20, climb=False,
        rerun=False,
    )  # fmt: skip
    leaky = learner_factory(_leaks_under_continuous(_schedule_iteration()), "continuous")
    assert explore.replay(leaky, "continuous", drawn) is None


def test_only_a_search_that_neither_climbs_nor_reruns_keeps_its_workloads() -> None:
    factory = learner_factory(_schedule_iteration(), "static")
    assert search(factory, "static", "ci", 5, climb=False, rerun=False).drawn  # the control
    assert not search(factory, "static", "ci", 5, climb=True, rerun=False).drawn
    assert not search(factory, "static", "ci", 5, climb=False, rerun=True).drawn


def test_a_replay_stops_where_the_budget_ends_past_the_minimum() -> None:
    correct = _schedule_iteration()
    drawn = search(learner_factory(correct, "static"), "static", "ci", 20, climb=False, rerun=False)
    spent = explore.replay(learner_factory(correct, "continuous"), "continuous", drawn, until=0.0)
    assert spent is not None and spent.budget_spent and spent.examples == 0
    held = explore.replay(
        learner_factory(correct, "continuous"), "continuous", drawn, until=0.0, minimum=3
    )
    assert held is not None and held.budget_spent and held.examples == 3


def _leaks_under_continuous(correct: Any) -> Any:
    """The correct solution, but under continuous batching the last free page goes missing
    once two requests have finished: a leak the fixed workloads are not run to find here."""

    def schedule_iteration(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        state = correct(state, limits, policy)
        if policy == "continuous" and len(state["finished"]) >= 2 and state["free_pages"]:
            state["free_pages"].pop()
        return state

    return schedule_iteration


def test_a_learner_that_breaks_only_the_second_policy_is_found_and_shrunk_as_before() -> None:
    solution = LearnerSolution("leaky.py", None, _leaks_under_continuous(_schedule_iteration()))
    target = LearnerTarget("leaky.py", solution)
    options = CheckOptions(max_examples=20, families=False, teaching_trace=False)
    static, continuous = check_target(target, options).verdicts
    assert static.finding is None and continuous.finding is not None
    # Alone, the continuous policy's check shares nothing: its own search found the same.
    (alone,) = check_target(target, replace(options, policy="continuous")).verdicts
    assert alone == continuous  # the finding, its witness shrunk, the evidence
