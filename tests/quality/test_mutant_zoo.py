"""Every mutant of the zoo is caught by ``kvsched check`` with the right invariant id, and only it.

These tests go through :func:`kvsched.checks.mutants.run.check_mutant`: ``load_target`` and the same
check ``kvsched check`` runs (in this process, so a failure shows here; the command runs it in a
child). ``test_check_cli.py`` runs the zoo once end to end through ``kvsched mutants``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.mutants import corners, hybrid, reuse
from kvsched.checks.mutants.logs import early_arrival_log, partial_prefill_log
from kvsched.checks.mutants.run import check_mutant, reported_ids
from kvsched.checks.mutants.zoo import ZOO
from kvsched.checks.targets.load import load_target
from kvsched.spec.invariants import BY_ID
from kvsched.spec.workload import load_workload

REQUIRED_BUG_CLASSES = (
    "off-by-one rounding", "page in two tables", "leak on finish", "reuse before free",
    "two tokens", "token for a waiting request", "admission before arrival", "dropped request",
    "finished twice", "static admits mid-batch", "continuous idles", "starvation",
    "pool overcommit",
)  # fmt: skip


def test_the_zoo_has_every_bug_class_with_catalogue_ids() -> None:
    names = [m.name for m in ZOO]
    assert set(REQUIRED_BUG_CLASSES) <= set(names)
    assert len(names) == len(set(names))
    assert all(m.expected in BY_ID for m in ZOO)


@pytest.mark.parametrize("mutant", ZOO, ids=[m.name for m in ZOO])
def test_mutant_is_caught_with_the_right_id(mutant: object, tmp_path: Path) -> None:
    outcome = check_mutant(mutant, tmp_path, isolated=False)  # type: ignore[arg-type]
    assert outcome.reported, f"{outcome.name} went uncaught"
    assert set(outcome.reported) == {outcome.expected}, outcome


@pytest.mark.parametrize(
    "name", ["page in two tables", "dropped request", "starvation", "learner: leak"]
)
def test_a_saved_counterexample_replays_the_same_finding(name: str, tmp_path: Path) -> None:
    from kvsched.checks.verdict.files import save_failing_workloads

    mutant = next(m for m in ZOO if m.name == name)
    target = load_target(mutant.materialise(tmp_path))
    options = CheckOptions(policy=mutant.policy, timeout=mutant.timeout)
    report = save_failing_workloads(check_target(target, options), tmp_path / "saved")
    verdict = next(v for v in report.verdicts if v.finding is not None)
    assert verdict.counterexample is not None and verdict.finding is not None
    saved = Path(verdict.counterexample.saved_to)
    replay_options = CheckOptions(
        workload=load_workload(saved), policy=verdict.policy, hypothesis=False, teaching_trace=False
    )
    replayed = check_target(target, replay_options)
    again = next(v for v in replayed.verdicts if v.finding is not None)
    assert again.finding is not None
    assert (again.finding.invariant, again.finding.iteration) == (
        verdict.finding.invariant,
        verdict.finding.iteration,
    )
    assert again.counterexample is not None
    assert again.counterexample.workload.requests == verdict.counterexample.workload.requests


ENGINE_LOGS = [m.write for m in ZOO if m.name.startswith("engine:")]


@pytest.mark.parametrize("write", [early_arrival_log, partial_prefill_log, *ENGINE_LOGS])
def test_the_broken_engines_are_clean_without_their_bug(write: Any, tmp_path: Path) -> None:
    # Each log mutant must be caught for its bug, not for how the log was made.
    assert check_log(write(tmp_path, buggy=False)) is None
    finding = check_log(write(tmp_path))
    # found in an iteration, or (a run that never drains) at its end
    assert finding is not None and (finding.iteration > 0 or finding.invariant == "LIVE-1")


def test_the_references_are_clean_controls_for_the_zoo() -> None:
    # A checker that reported everything would catch every mutant; the references must pass.
    for spec in (
        "kvsched.reference.static:StaticScheduler",
        "kvsched.reference.continuous:ContinuousScheduler",
    ):
        assert reported_ids(check_target(load_target(spec), CheckOptions())) == ()


CORNER_MUTANTS = [m for m in ZOO if m.name in (
    "priority victim refunded twice", "full hit on a page multiple", "revived hit counted free",
    "hit evicted before provisioned", "partial tail shared",
)]  # fmt: skip


@pytest.mark.parametrize("mutant", CORNER_MUTANTS, ids=[m.name for m in CORNER_MUTANTS])
def test_a_corner_bug_comes_with_a_counterexample_a_person_can_read(
    mutant: Any, tmp_path: Path
) -> None:
    # Each has a witness of 2 or 3 requests (checks/search/corners.py, BOUNDARY_SHAPES).
    report = check_target(load_target(mutant.materialise(tmp_path)), CheckOptions())
    (verdict,) = report.verdicts
    assert verdict.finding is not None and verdict.finding.invariant == mutant.expected
    assert verdict.counterexample is not None
    assert len(verdict.counterexample.workload.requests) <= 4, verdict.counterexample.workload


TWINS = {**corners.TWINS, **reuse.TWINS, **hybrid.TWINS}


@pytest.mark.parametrize("twin", sorted(set(TWINS.values()), key=lambda c: c.__name__))
def test_the_corner_mutants_twins_are_clean(twin: type) -> None:
    spec = f"{twin.__module__}:{twin.__name__}"
    assert reported_ids(check_target(load_target(spec), CheckOptions())) == ()
