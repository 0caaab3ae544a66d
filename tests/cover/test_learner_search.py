"""How a learner's file is searched: Hypothesis never climbs, and no workload is judged twice.

A class's search steers towards crowded runs and the corners of its design with Hypothesis's
``target()`` (checks/search/corners.py, ``aim``), and judges a workload each time Hypothesis
draws it. A learner's search does neither: each of its iterations is a round trip to the host.
These tests read what Hypothesis observed of each test case, and which workloads were run.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis.internal.observability import with_observability_callback

from kvsched.checks.judge.check import CheckOptions, check_target
from kvsched.checks.mutants.engine import V1
from kvsched.checks.search import explore
from kvsched.checks.search.explore import search
from kvsched.checks.targets.learner import learner_factory
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
