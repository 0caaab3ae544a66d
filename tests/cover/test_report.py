"""`kvsched report`: what the teaching-trace report says and shows, reproducibility, inputs.

The gate (thresholds, planted regressions) is tests/cover/test_gate.py.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest

from kvsched.cli import main
from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.reference.families import generate
from kvsched.reports.asv_results import read_asv_results
from kvsched.reports.collect import FAST, STEPPED, run_case
from kvsched.reports.progress import Progress
from kvsched.reports.render import Code, Paragraph, Table, png_size, to_html, to_markdown
from kvsched.reports.results import (
    CaseResult,
    ResultsError,
    ResultSet,
    read_results,
    write_results,
)
from kvsched.reports.sources import read_source
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import workload_to_json

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


FIXED_TIME = "1767225600"  # SOURCE_DATE_EPOCH: 2026-01-01, so regenerating gives the same bytes


@pytest.fixture(scope="module")
def teaching_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOURCE_DATE_EPOCH", FIXED_TIME)
        assert main(["report", "--out", str(out)]) == 0
    return out / "teaching"


def test_teaching_report_tells_the_88_vs_116_story(teaching_report: Path) -> None:
    """The story's figures are the runs' own, read here independently from the events."""
    trace = load_teaching_trace()
    runs = {policy: run(trace, factory) for policy, factory in POLICIES.items()}
    metrics = {policy: compute_metrics(trace, r.events) for policy, r in runs.items()}
    finished = {
        policy: {rid: e.iteration for e in r.events for rid in e.finished}
        for policy, r in runs.items()
    }
    admitted = {rid: e.iteration for e in runs["continuous"].events for rid in e.admitted}
    markdown = " ".join((teaching_report / "report.md").read_text().split())
    assert "kvsched report --name teaching --out" in markdown  # the regenerating command
    assert (
        f"static batching takes **{metrics['static'].iterations}** iterations and continuous "
        f"batching **{metrics['continuous'].iterations}**"
    ) in markdown
    assert f"`a` finishes in iteration {finished['static']['a']}" in markdown
    assert f"`d` takes the freed slot in iteration {admitted['d']}" in markdown
    assert admitted["d"] == finished["continuous"]["a"] + 1
    assert "| first batch | a · b · c | a · b · c | yes |" in markdown
    for plot in ("membership-teaching.png", "pages-teaching.png", "waits-teaching.png"):
        assert f"]({plot})" in markdown
        assert (teaching_report / plot).read_bytes().startswith(PNG_SIGNATURE)


def test_html_is_self_contained(teaching_report: Path, tmp_path: Path) -> None:
    """report.html kept alone, as a CI artifact, still holds every plot, byte for byte."""
    alone = tmp_path / "report.html"
    alone.write_bytes((teaching_report / "report.html").read_bytes())
    page = alone.read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    sources = re.findall(r'<img src="([^"]*)" width="(\d+)" height="(\d+)"', page)
    assert len(sources) == page.count("<img") == 3
    prefix = "data:image/png;base64,"
    embedded = [base64.b64decode(src.removeprefix(prefix)) for src, _, _ in sources]
    plots = ("membership-teaching.png", "pages-teaching.png", "waits-teaching.png")
    assert embedded == [(teaching_report / name).read_bytes() for name in plots]
    for png, (_, width, height) in zip(embedded, sources, strict=True):
        # Saved at twice the size it is shown at, so it stays sharp on a dense screen.
        assert png_size(png) == (2 * int(width), 2 * int(height))


def test_results_json_holds_the_computed_figures(teaching_report: Path) -> None:
    trace = load_teaching_trace()
    results = read_results(teaching_report / "results.json")
    assert [case.policy for case in results.cases] == ["static", "continuous"]
    for case in results.cases:
        computed = compute_metrics(trace, run(trace, POLICIES[case.policy]).events)
        assert case.metrics["iterations"] == computed.iterations
        assert case.metrics["p95_wait"] == computed.p95_wait
        assert case.metrics["utilization"] == computed.utilization


def test_committed_teaching_report_is_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reports/teaching/ is what its own command regenerates (rerun it after a trace change)."""
    committed = Path(__file__).parents[2] / "reports" / "teaching"
    if not committed.is_dir():
        pytest.skip("reports/teaching/ is not in this checkout")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--name", "teaching", "--out", "reports", "--no-plots"]) == 0
    fresh = read_results(tmp_path / "reports" / "teaching" / "results.json")
    stale = (
        "reports/teaching/ is stale: regenerate it from the repo root with "
        "`kvsched report --name teaching --out reports`"
    )
    # The provenance (commit, time) differs from run to run; the figures must not.
    assert fresh.cases == read_results(committed / "results.json").cases, stale


def test_regenerating_gives_the_same_bytes(
    teaching_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {path.name: path.read_bytes() for path in sorted(teaching_report.iterdir())}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", FIXED_TIME)
    assert main(["report", "--out", str(teaching_report.parent)]) == 0
    after = {path.name: path.read_bytes() for path in sorted(teaching_report.iterdir())}
    assert after == before


def test_png_metadata_names_no_software_or_date(teaching_report: Path) -> None:
    data = (teaching_report / "membership-teaching.png").read_bytes()
    assert b"tEXt" not in data and b"tIME" not in data


def test_wasted_slot_series_agrees_with_the_metrics() -> None:
    workload = generate("bursty-short-tight", 60, seed=3)
    for policy, factory in POLICIES.items():
        case = run_case(workload, policy, factory)
        assert case.series is not None
        assert max(case.series.wasted_slots) == case.metrics.peak_wasted_slots
        busy = sum(1 for active in case.series.active if active)
        assert sum(case.series.wasted_slots) / busy == case.metrics.mean_wasted_slots
        assert max(case.series.pages_in_use) == case.metrics.peak_pages


def test_fast_path_gives_the_stepped_figures_and_spans() -> None:
    workload = generate("poisson-long-tight", 80, seed=1)
    for policy, factory in POLICIES.items():
        stepped = run_case(workload, policy, factory, STEPPED)
        fast = run_case(workload, policy, factory, FAST)
        # the section-7 figures agree; the efficiency figures come from stepped runs only
        assert fast.metrics == stepped.metrics and fast.efficiency is None
        assert fast.result.metrics.items() <= stepped.result.metrics.items()
        assert fast.spans == stepped.spans
        assert fast.series is None


def test_progress_bar_only_on_a_terminal_and_never_changes_the_run() -> None:
    workload = generate("poisson-short-roomy", 40, seed=2)
    quiet = io.StringIO()
    plain = run_case(workload, "continuous", POLICIES["continuous"], STEPPED, Progress(quiet))
    assert quiet.getvalue() == ""  # a StringIO is not a terminal
    shown = io.StringIO()
    barred = run_case(
        workload, "continuous", POLICIES["continuous"], STEPPED, Progress(shown, enabled=True)
    )
    assert barred.result == plain.result and barred.spans == plain.spans
    assert "40/40" in shown.getvalue() and shown.getvalue().endswith("\n")


def test_render_escapes_html_and_pipes() -> None:
    blocks = [
        Paragraph("a <b> & `c|d`"),
        Code("x < y"),
        Table(("name", "value"), (("p|q", "1"),)),
    ]
    page = to_html(blocks, "t")
    assert "a &lt;b&gt; &amp; <code>c|d</code>" in page
    assert "<pre><code>x &lt; y</code></pre>" in page
    assert "p\\|q" in to_markdown(blocks)


def test_results_round_trip_and_bad_files_name_the_field(tmp_path: Path) -> None:
    results = ResultSet("here", (CaseResult("w", "static", {"iterations": 3, "utilization": 0.5}),))
    write_results(results, tmp_path / "results.json")
    assert read_source(str(tmp_path)) == read_results(tmp_path / "results.json")
    assert read_results(tmp_path / "results.json").cases == results.cases
    document = json.loads((tmp_path / "results.json").read_text())
    document["cases"][0]["metrics"]["iterations"] = "three"
    (tmp_path / "results.json").write_text(json.dumps(document))
    with pytest.raises(ResultsError, match="case #0: metric 'iterations' must be a number"):
        read_results(tmp_path / "results.json")


def write_asv_run(folder: Path, commit: str, p95: dict[str, float | None]) -> None:
    """An asv results tree written by asv's own Results class, as `asv run` leaves it."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    benchmark = {
        "name": "bench_teaching.Teaching.track_p95_wait",
        "params": [["'static'", "'continuous'"]],
        "param_names": ["policy"],
        "type": "track",
        "unit": "iterations",
        "version": "1",
    }
    (folder / "ci").mkdir(parents=True, exist_ok=True)
    (folder / "benchmarks.json").write_text(
        json.dumps({"version": 2, benchmark["name"]: benchmark})
    )
    (folder / "ci" / "machine.json").write_text(json.dumps({"machine": "ci", "version": 1}))
    run = Results({"machine": "ci"}, {}, commit, 0, "3.11", "existing-py", {})
    values = [p95["static"], p95["continuous"]]
    run.add_result(benchmark, BenchmarkResult(values, [None, None], [None, None], 0, "", None))
    run.save(str(folder))


def test_asv_results_become_cases_by_policy(tmp_path: Path) -> None:
    write_asv_run(tmp_path, "a" * 40, {"static": 19.6, "continuous": 7.0})
    results = read_asv_results(tmp_path)
    assert [(c.workload, c.policy, dict(c.metrics)) for c in results.cases] == [
        ("bench_teaching.Teaching", "static", {"p95_wait": 19.6}),
        ("bench_teaching.Teaching", "continuous", {"p95_wait": 7.0}),
    ]
    assert results.cases[0].units == {"p95_wait": "iterations"}


def test_asv_tree_with_two_runs_needs_a_commit(tmp_path: Path) -> None:
    write_asv_run(tmp_path, "a" * 40, {"static": 19.6, "continuous": 7.0})
    write_asv_run(tmp_path, "b" * 40, {"static": 20.0, "continuous": 9.0})
    with pytest.raises(ResultsError, match="holds 2 asv runs"):
        read_source(str(tmp_path))
    chosen = read_source(f"{tmp_path}@bbbb")
    assert chosen.cases[1].metrics == {"p95_wait": 9.0}


def test_report_from_asv_results(tmp_path: Path) -> None:
    write_asv_run(tmp_path / "asv", "c" * 40, {"static": 19.6, "continuous": 7.0})
    code = main(["report", "--asv-results", str(tmp_path / "asv"), "--out", str(tmp_path)])
    assert code == 0
    markdown = " ".join((tmp_path / "asv-report" / "report.md").read_text().split())
    assert "asv results of commit cccccccccc" in markdown
    assert "| bench_teaching.Teaching / continuous | `p95_wait` |" in markdown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.json"], "cannot read the workload file"),
        (["--policies", "static,eager"], "'eager' is not a reference policy"),
        (["--policies", "static,static"], "'static' is given twice"),
        (["family:nope:10"], "unknown workload family"),
        (["family:poisson-short-tight:ten"], "'ten' is not a non-negative integer"),
        (["--baseline", "nowhere"], "nowhere: no such report folder"),
        (["--policies", "mine=no_such_module_xyz:Sched"], "mine=no_such_module_xyz:Sched"),
        (
            ["--engine", "fast", "--policies", "static=kvsched.reference:ContinuousScheduler"],
            "--engine fast replays the reference policies only; static must run stepped",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_several_workloads_need_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    teaching = tmp_path / "teaching.json"
    teaching.write_text(json.dumps(workload_to_json(load_teaching_trace())))
    argv = ["report", str(teaching), "family:poisson-short-roomy:12:1", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "give the report --name" in capsys.readouterr().err
    assert main([*argv, "--name", "two"]) == 0
    markdown = (tmp_path / "two" / "report.md").read_text()
    assert "## Workload `teaching`" in markdown
    assert "## Workload `poisson-short-roomy-n12-s1`" in markdown


def test_a_scheduler_under_test_never_takes_the_fast_path() -> None:
    from kvsched.reports.collect import FAST_FROM, choose_engine

    large = generate("poisson-short-roomy", FAST_FROM, seed=1)
    reference = POLICIES["continuous"]
    assert choose_engine(large, "continuous", reference, "auto") == FAST
    # Same name, same behaviour, but not the reference object: it is what is under test.
    assert choose_engine(large, "continuous", lambda limits: reference(limits), "auto") == STEPPED
