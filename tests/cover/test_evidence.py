"""A pass is evidence: what kvsched reads of a target itself, the coverage a verdict states, and
the INCONCLUSIVE outcome (exit 4) when too little was observed for a pass."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from pathlib import Path

import pytest

from kvsched.checks.judge import trial as trial_module
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.monitor.coverage import reached
from kvsched.checks.search.explore import SearchResult, search
from kvsched.checks.targets.load import SchedulerTarget, TargetError, target_kind
from kvsched.checks.targets.source import defined_functions, expect
from kvsched.checks.verdict.machine import render_json, render_junit_xml
from kvsched.checks.verdict.render import render_table
from kvsched.checks.verdict.report import (
    INCONCLUSIVE,
    PASS,
    Evidence,
    Report,
    build_verdict,
)
from kvsched.cli import main
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine import run
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.vocabulary import ExitCode

REFERENCE = SchedulerTarget("continuous", ContinuousScheduler, "continuous", None)
QUICK = CheckOptions(families=False, proof_requests=0, max_examples=5)


# What kvsched reads without running the target.


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def allocate_kv_pages(t, p=16):\n    return 0\n", ("allocate_kv_pages",)),
        ("def schedule_iteratoin(s, l, p):\n    return s\n", ()),
        ("from mine import schedule_iteration as schedule_iteration\n", ("schedule_iteration",)),
        ("schedule_iteration = lambda s, l, p: s\n", ("schedule_iteration",)),
        (
            "try:\n    from fast import allocate_kv_pages\nexcept ImportError:\n"
            "    def allocate_kv_pages(t, p=16):\n        return 0\n"
            "if True:\n    def schedule_iteration(s, l, p):\n        return s\n",
            ("allocate_kv_pages", "schedule_iteration"),
        ),
        # A function defined inside another is not the module's.
        ("def outer():\n    def schedule_iteration(s, l, p):\n        return s\n", ()),
    ],
)
def test_a_learners_functions_are_read_off_its_source(
    tmp_path: Path, source: str, found: tuple[str, ...]
) -> None:
    path = tmp_path / "solution.py"
    path.write_text(source)
    assert defined_functions(str(path)) == found


def test_a_learner_whose_source_binds_neither_function_is_refused_hosted_too(
    tmp_path: Path,
) -> None:
    """Its functions made by running code (``exec``) are not read off the source: as a module
    binding neither is refused in this process, so is it in a host (exit 2, not a check of
    nothing)."""
    from kvsched.checks.targets.confinement import Confinement
    from kvsched.checks.targets.load import TargetError
    from kvsched.checks.targets.remote import RemoteTarget

    path = tmp_path / "made.py"
    path.write_text('exec("def schedule_iteration(s, l, p):\\n    return s")\n')
    remote = RemoteTarget(str(path), Confinement(sandbox="none"), "learner")
    try:
        with pytest.raises(TargetError, match="defines neither"):
            remote.load()
    finally:
        remote.close()


def test_a_dotted_learner_module_is_read_without_importing_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    package = tmp_path / "homework"
    package.mkdir()
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "solution.py").write_text("def schedule_iteration(s, l, p):\n    return s\n")
    monkeypatch.chdir(tmp_path)
    assert defined_functions("homework.solution") == ("schedule_iteration",)
    assert not marker.exists()
    assert defined_functions("homework.nowhere") is None  # unreadable: both are asked for


def test_the_kind_follows_from_the_command_line_and_the_graders_expectation() -> None:
    assert target_kind("sub/solution.py") == "learner"
    assert target_kind("sub/solution.py:schedule_iteration") == "learner"
    assert target_kind("sub/mine.py:Mine") == "scheduler"
    assert target_kind("run.jsonl.gz") == "event log"
    assert expect("sub/solution.py", "learner") == "learner"
    with pytest.raises(TargetError, match="--expect learner wants a learner"):
        expect("sub/mine.py:Mine", "learner")
    with pytest.raises(TargetError, match="--expect scheduler wants a scheduler"):
        expect("run.jsonl", "scheduler")


def test_expect_refuses_another_kind_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "mine.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\nclass Mine: pass\n")
    assert main(["check", f"{path}:Mine", "--expect", "learner"]) == ExitCode.USAGE
    assert "--expect learner" in capsys.readouterr().err
    assert not marker.exists()


# Coverage, read off the runs.


def test_coverage_is_read_off_the_engines_record_of_the_run() -> None:
    workload = load_teaching_trace()
    result = run(workload, ContinuousScheduler, "continuous")
    covered = reached(result)
    assert covered.runs == 1
    assert covered.iterations == len(result.events)
    assert covered.requests == len(workload.requests)
    # The teaching trace admits every request: the longest context is the longest request.
    assert covered.context == max(r.prompt_tokens + r.output_tokens for r in workload.requests)
    fullest = max(e.pages_in_use for e in result.events)
    assert covered.pool_pressure == 100 * fullest // workload.limits.pool_pages
    assert covered.preemptions == sum(len(e.preempted) for e in result.events)
    both = covered + covered
    assert (both.runs, both.iterations) == (2, 2 * covered.iterations)
    assert (both.requests, both.context) == (covered.requests, covered.context)


def test_a_verdict_states_its_coverage_in_every_output() -> None:
    report = check_target(REFERENCE, QUICK)
    assert report.outcome == PASS
    [verdict] = report.verdicts
    coverage = verdict.evidence.coverage
    assert coverage.runs == 1 + verdict.evidence.hypothesis_examples  # the teaching trace too
    assert "Coverage: " in render_table(report)
    document = json.loads(render_json(report))
    assert document["verdicts"][0]["evidence"]["coverage"]["runs"] == coverage.runs
    root = ElementTree.fromstring(render_junit_xml(report))
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["coverage.runs"] == str(coverage.runs)
    assert properties["coverage.max_requests"] == str(coverage.requests)
    assert properties["outcome"] == "pass"


# Too little evidence is INCONCLUSIVE, never a pass.


def test_the_time_budget_stops_no_search_before_its_minimum() -> None:
    spent = time.monotonic() - 1  # the budget is already gone
    result = search(ContinuousScheduler, "continuous", max_examples=20, until=spent, minimum=7)
    assert result.examples >= 7
    assert result.budget_spent


def test_a_search_short_of_its_minimum_is_inconclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    def starved(self: trial_module.Trial, invariant: str | None = None) -> SearchResult:
        return SearchResult(self.policy, "ci", 3, None, budget_spent=True)

    monkeypatch.setattr(trial_module.Trial, "search", starved)
    report = check_target(REFERENCE, replace(QUICK, max_examples=None))
    assert report.outcome == INCONCLUSIVE
    assert report.exit_code == ExitCode.INCONCLUSIVE == 4
    assert not report.ok
    assert "fewer than the 25 the ci profile needs" in report.reasons[0]
    table = render_table(report)
    assert table.startswith("INCONCLUSIVE  continuous: too little evidence for a pass")
    document = json.loads(render_json(report))
    assert (document["ok"], document["outcome"], document["exit_code"]) == (
        False,
        "inconclusive",
        4,
    )
    root = ElementTree.fromstring(render_junit_xml(report))
    assert root.get("errors") == "1"


def test_a_check_that_judged_nothing_is_inconclusive() -> None:
    report = Report("forged", ())
    assert report.outcome == INCONCLUSIVE
    assert report.exit_code == ExitCode.INCONCLUSIVE
    assert "nothing was judged" in report.reasons[0]
    root = ElementTree.fromstring(render_junit_xml(report))
    assert root.get("tests") == "1" and root.get("errors") == "1"


def test_a_verdict_whose_runs_judged_no_iteration_is_inconclusive() -> None:
    empty = build_verdict("t", "scheduler", "continuous", Evidence(), None)
    assert empty.outcome == INCONCLUSIVE
    assert "no iteration was judged" in empty.reasons[0]
    assert Report("t", (empty,)).exit_code == ExitCode.INCONCLUSIVE


def test_a_finding_wins_over_thin_evidence(tmp_path: Path) -> None:
    path = tmp_path / "solution.py"  # a wrong allocator, and no schedule_iteration
    path.write_text("def allocate_kv_pages(tokens, page_size=16):\n    return tokens // 16\n")
    code = main(["check", str(path), "--no-hypothesis", "--sandbox", "none", "--json"])
    assert code == ExitCode.FINDING
