"""A budget the user sees, and an exact replay of what ran: the seed and the example database."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.search.corners import BOUNDARY_SHAPES
from kvsched.checks.search.explore import search
from kvsched.checks.search.runs import PROFILE_RUNS, BudgetSpent, spend
from kvsched.cli import main
from kvsched.reference import POLICIES
from kvsched.spec.workload import Limits

CORRECT = str(Path(__file__).resolve().parents[2] / "examples" / "learner" / "correct.py")


class Recording:
    """The reference continuous scheduler, recording the limits of every run it is built for."""

    def __init__(self) -> None:
        self.built: list[Limits] = []

    def __call__(self, limits: Limits) -> Any:
        self.built.append(limits)
        return POLICIES["continuous"](limits)


def _drawn(seed: int | None, profile: str = "dev") -> list[Limits]:
    factory = Recording()
    result = search(factory, "continuous", profile, max_examples=15, seed=seed)
    assert result.clean and result.examples == 15 + len(BOUNDARY_SHAPES)  # the shapes run beside
    return factory.built


def test_a_seed_replays_the_search_exactly_and_another_draws_other_examples() -> None:
    assert _drawn(11) == _drawn(11)
    assert _drawn(11) != _drawn(12)


def test_a_spent_budget_stops_the_search_before_the_next_example() -> None:
    result = search(Recording(), "continuous", "ci", until=time.monotonic())
    assert result.budget_spent and result.examples == 0 and result.clean


def test_a_spent_budget_never_stops_the_shrinking_of_a_found_failure() -> None:
    spend(time.monotonic() - 1, hold=True)  # a counterexample is being shrunk: go on
    spend(None, hold=False)
    with pytest.raises(BudgetSpent):
        spend(time.monotonic() - 1, hold=False)


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    quick = ("--no-hypothesis", "--policy", "continuous", "--json")
    assert main(["check", CORRECT, *quick, *argv]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_the_report_states_the_seed_the_database_and_the_profiles_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    notes = " ".join(_report(capsys, "--seed", "4242")["notes"])
    assert "seed 4242 (--profile ci --seed 4242 replays it)" in notes
    assert "example database: none" in notes
    budget = PROFILE_RUNS["ci"].budget_seconds
    assert f"time budget {budget:g} s" in notes and f"{budget:g} s for the whole check" in notes
    notes = " ".join(_report(capsys)["notes"])
    assert "derandomized draws (--profile ci" in notes


def test_budget_overrides_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    notes = " ".join(_report(capsys, "--budget", "900")["notes"])
    assert "time budget 900 s" in notes and "900 s for the whole check" in notes


def test_a_schedulers_check_without_hypothesis_says_it_drew_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "good.py").write_text(
        "from kvsched.reference import ContinuousScheduler\n\n"
        "class Good(ContinuousScheduler):\n    pass\n",
        encoding="utf-8",
    )
    argv = ["check", f"{tmp_path / 'good.py'}:Good", "--no-hypothesis", "--json"]
    assert main([*argv, "--z3-requests", "0", "--budget", "60"]) == 0
    notes = " ".join(json.loads(capsys.readouterr().out)["notes"])
    assert "Hypothesis: not run (--no-hypothesis)" in notes and "seed" not in notes
