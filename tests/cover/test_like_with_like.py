"""The gate compares like with like, the README's gate command works, and figures have a history."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from test_report import write_asv_run

from kvsched import cli
from kvsched.reports.compare import compare
from kvsched.reports.history import read_history
from kvsched.reports.results import CaseResult, ResultSet, read_results
from kvsched.spec.teaching import TEACHING_TRACE

ROOT = Path(__file__).resolve().parents[2]


def _case(name: str, content: str, pool: int, p95: float) -> CaseResult:
    limits = {"batch_limit": 3, "page_size": 16, "pool_pages": pool}
    return CaseResult(name, "static", {"p95_wait": p95}, {}, content, limits)


def test_runs_match_by_content_whatever_their_names() -> None:
    baseline = ResultSet("base", (_case("teaching", "abc", 64, 19.0),))
    candidate = ResultSet("new", (_case("renamed", "abc", 64, 20.0),))
    comparison = compare(baseline, candidate)
    assert [(c.baseline, c.candidate) for c in comparison.changes] == [(19.0, 20.0)]
    assert comparison.only_in_baseline == () and comparison.warnings == ()


def test_changed_limits_under_one_name_warn() -> None:
    baseline = ResultSet("base", (_case("w", "abc", 64, 19.0),))
    candidate = ResultSet("new", (_case("w", "abc", 40, 19.0),))
    (warning,) = compare(baseline, candidate).warnings
    assert "limits differ" in warning and "pool_pages 64 -> 40" in warning


def test_other_requests_under_one_name_warn() -> None:
    baseline = ResultSet("base", (_case("w", "abc", 64, 19.0),))
    candidate = ResultSet("new", (_case("w", "xyz", 64, 19.0),))
    (warning,) = compare(baseline, candidate).warnings
    assert "different requests" in warning


def test_results_json_records_content_and_limits() -> None:
    (case, _) = read_results(ROOT / "reports" / "teaching" / "results.json").cases
    assert len(case.content) == 16
    assert case.limits == {"batch_limit": 3, "page_size": 16, "pool_pages": 64}


def test_the_readme_gate_command_works_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "--fail-on 'p95_wait>+5%'" in x)
    words = shlex.split(line.split("#")[0])
    assert words[:2] == ["kvsched", "report"]
    monkeypatch.chdir(ROOT)
    words = [tmp_path.as_posix() if w == "/tmp" else w for w in words]
    assert cli.main(words[1:]) == 0, capsys.readouterr()
    assert "gate passed" in capsys.readouterr().out

    # The same gate on the trace with a tighter pool: matched by its requests, with a warning.
    document = json.loads(TEACHING_TRACE.read_text())
    document["limits"]["pool_pages"] = 40
    tighter = tmp_path / "tighter.json"
    tighter.write_text(json.dumps(document))
    words[2] = str(tighter)
    assert cli.main(words[1:]) in (0, 1)
    assert "limits differ from the baseline's (pool_pages 64 -> 40)" in capsys.readouterr().err


def test_history_draws_a_figure_over_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "asv"
    write_asv_run(results, "a" * 40, {"static": 19.0, "continuous": 7.0})
    write_asv_run(results, "b" * 40, {"static": 20.0, "continuous": 7.0})
    (history,) = read_history(results, ["p95_wait"])
    assert history.commits == ("aaaaaaaa", "bbbbbbbb")
    assert history.series["bench_teaching.Teaching / static"] == (19.0, 20.0)
    out = tmp_path / "out"
    argv = ["report", "--history", str(results), "--out", str(out), "--metric", "p95_wait"]
    assert cli.main(argv) == 0
    assert re.search(r"\| +19 \| +\*\*20\*\* \|", (out / "history" / "history.md").read_text())
    assert (out / "history" / "history-p95_wait.png").read_bytes().startswith(b"\x89PNG")
    assert cli.main(["report", "--history", str(results), "--metric", "nope"]) == 2
    assert "no run has a figure named 'nope'" in capsys.readouterr().err


def test_a_case_without_content_still_matches_by_name() -> None:
    baseline = ResultSet("asv", (replace(_case("w", "", 64, 1.0), limits={}),))
    candidate = ResultSet("new", (_case("w", "abc", 64, 2.0),))
    assert [c.candidate for c in compare(baseline, candidate).changes] == [2.0]
