"""What a report's page shows a reader: the verdict first, figures that scale and do not mislead.

The page as a browser draws it (images load, the banner in the first screen) is
tests/cover/test_report_browser.py; the gate's arithmetic is tests/cover/test_gate.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_report import write_asv_run  # tests/ is on sys.path (rootdir insertion)

from kvsched.cli import main
from kvsched.reference import POLICIES
from kvsched.reference.families import generate
from kvsched.reports import numbers
from kvsched.reports.banner import BANNER_ROWS, Subject, banner
from kvsched.reports.collect import FAST, STEPPED, run_case
from kvsched.reports.compare import Comparison, MetricChange
from kvsched.reports.gate import check_gate, parse_threshold
from kvsched.reports.observations import backlog, idle_slot_words, memory_binds
from kvsched.reports.provenance import Provenance
from kvsched.reports.series import counts_from_spans
from kvsched.reports.story import names
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import workload_to_json

ROOT = Path(__file__).resolve().parents[2]
TIME = "1767225600"  # 2026-01-01T00:00:00Z


class _Page(HTMLParser):
    """The elements a reader sees, in order: tag, attributes and the text directly in them."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        self.text.append(data)


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The teaching trace as a baseline, then a candidate where g and h arrive early: a breach."""
    out = tmp_path_factory.mktemp("failing")
    assert main(["report", "--out", str(out / "base"), "--no-plots"]) == 0
    document = workload_to_json(load_teaching_trace())
    for request in document["requests"]:
        if request["id"] in ("g", "h"):
            request["arrival"] = 20
    crowded = out / "crowded.json"
    crowded.write_text(json.dumps(document))
    argv = ["report", str(crowded), "--name", "teaching", "--out", str(out / "new")]
    argv += ["--baseline", str(out / "base" / "teaching"), "--fail-on", "p95_wait>+5%"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOURCE_DATE_EPOCH", TIME)
        patch.chdir(ROOT)  # a git checkout, so the banner names a commit
        assert main(argv) == 1
    return out / "new" / "teaching"


def test_the_verdict_comes_first_coloured_and_in_the_title(failing: Path) -> None:
    page = _Page((failing / "report.html").read_text())
    assert page.title.startswith("Gate failed")
    first = page.tags[[tag for tag, _ in page.tags].index("body") + 1]
    assert first == ("section", {"class": "banner failed", "id": "verdict", "role": "status"})
    markdown = (failing / "report.md").read_text()
    banner = markdown.split("\n\n")[0]
    results = json.loads((failing / "results.json").read_text())
    base = json.loads((failing.parent.parent / "base" / "teaching" / "results.json").read_text())
    before, after = (
        next(c["metrics"]["p95_wait"] for c in r["cases"] if c["policy"] == "static")
        for r in (base, results)
    )
    shown = numbers.values((before, after))
    row = r"\| teaching / static +\| `p95_wait` +\| +{} \| +{} \| .* \| `p95_wait>\+5%` +\|"
    assert re.search(row.format(*shown), banner), banner
    assert (
        "warning: teaching / static: the baseline's workload of that name has different" in banner
    )
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"baseline: `{failing.parent.parent / 'base' / 'teaching'}`" in banner
    assert "candidate: `teaching`" in banner
    assert f"commit {commit[:12]}" in banner and "made 2026-01-01 00:00:00 UTC" in banner
    assert results["provenance"]["commit"] == commit


def test_changed_and_gated_rows_come_first_and_the_rest_is_folded(failing: Path) -> None:
    markdown = (failing / "report.md").read_text()
    section = markdown.split("## Baseline against candidate")[1].split("### Gate")[0]
    shown, folded = section.split("<details>")
    shown_rows = [line for line in shown.splitlines() if line.startswith("| teaching")]
    folded_rows = [line for line in folded.splitlines() if line.startswith("| teaching")]
    assert shown_rows and folded_rows
    for row in shown_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] != "0" or cells[6] in ("ok", "**breach**"), row
    for row in folded_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[4] == "0" and cells[6] == "", row
    assert f"{len(folded_rows)} unchanged rows" in folded


def test_the_command_wraps_instead_of_scrolling(failing: Path) -> None:
    page = (failing / "report.html").read_text()
    style = page.split("<style>")[1].split("</style>")[0]
    assert "white-space: pre-wrap" in style and "overflow-x" not in style


def test_numbers_read_the_same_everywhere() -> None:
    assert numbers.values((2000, 19)) == ["2,000", "19"]
    assert numbers.values((19, 19.6)) == ["19.00", "19.60"]
    assert numbers.values((0.4734,), "fraction") == ["47.3%"]
    assert numbers.signed(-0.191, "fraction") == "-19.1 pp"
    assert numbers.signed(875, "iterations") == "+875"
    assert numbers.signed_percent(155.04) == "+155.0%" and numbers.signed_percent(0) == "0%"
    assert numbers.values((0.00123,), "seconds") == ["0.00123"]


def test_long_lists_of_requests_become_counts_and_ranges() -> None:
    order = [f"r{i}" for i in range(100)]
    assert names(["a", "b", "c"]) == "`a`, `b` and `c`"
    assert names(order[32:81], order) == "49 requests (`r32` to `r80`)"
    assert names([*order[3:6], *order[40:44]], order) == (
        "7 requests (`r3` to `r43`, not all in between)"
    )


def test_spans_count_what_the_stepped_engine_counts() -> None:
    """The crowd timeline of a fast-path run draws what a stepped run's events say."""
    workload = generate("bursty-short-tight", 120, seed=5)
    for policy, factory in POLICIES.items():
        stepped = run_case(workload, policy, factory, STEPPED)
        assert stepped.series is not None
        fast = run_case(workload, policy, factory, FAST)
        active, waiting = counts_from_spans(fast.spans, fast.metrics.iterations)
        assert active == stepped.series.active and waiting == stepped.series.waiting


def test_a_tight_pool_says_memory_binds_and_a_roomy_one_does_not() -> None:
    tight = generate("poisson-short-tight", 400, seed=0)
    roomy = generate("poisson-short-roomy", 400, seed=0)
    for policy, factory in POLICIES.items():
        binds = memory_binds(run_case(tight, policy, factory))
        assert binds.startswith(f"**Memory binds `{policy}`**") and "peaked at" in binds
        assert memory_binds(run_case(roomy, policy, factory)) == ""


def test_a_growing_queue_is_called_out_and_a_steady_one_is_not() -> None:
    overloaded = run_case(
        generate("poisson-short-tight", 400, seed=0), "static", POLICIES["static"]
    )
    words = backlog(overloaded)
    assert "last quarter of arrivals waited" in words and "queue peaked at" in words
    for policy, factory in POLICIES.items():
        assert backlog(run_case(load_teaching_trace(), policy, factory)) == ""


def test_idle_slots_are_explained_only_where_the_explanation_is_true(tmp_path: Path) -> None:
    workload = generate("poisson-short-tight", 60, seed=1)
    static = run_case(workload, "static", POLICIES["static"])
    assert "held until the batch drains (BATCH-2)" in idle_slot_words(static)
    # The static scheduler standing in for continuous: its idle slots are a regression here.
    impostor = run_case(workload, "continuous", POLICIES["static"])
    assert impostor.under_test
    words = idle_slot_words(impostor)
    assert "not explained here" in words and "head of the queue" not in words


def test_a_large_workload_gets_the_crowd_timeline_with_a_zoom(tmp_path: Path) -> None:
    argv = ["report", "family:poisson-short-tight:400:2", "--name", "big", "--out", str(tmp_path)]
    assert main(argv) == 0
    folder = tmp_path / "big"
    assert not list(folder.glob("membership-*.png"))
    markdown = (folder / "report.md").read_text()
    assert "](crowd-poisson-short-tight-n400-s2.png)" in markdown
    assert "a zoom on 40 requests in declared order (#181 to #220, the middle" in markdown
    assert "Each policy has its own time axis" in markdown
    assert main([*argv, "--zoom", "1:10"]) == 0
    assert (
        "a zoom on 10 requests in declared order (#1 to #10;" in (folder / "report.md").read_text()
    )
    assert main([*argv, "--zoom", "none"]) == 0
    assert "zoom" not in (folder / "report.md").read_text().split("## Workload")[1].lower()
    assert main([*argv, "--zoom", "0:5"]) == 2


def test_several_workloads_get_contents_and_one_overview(tmp_path: Path) -> None:
    argv = ["report", "spec/traces/teaching.json", "family:poisson-short-tight:60:1"]
    assert main([*argv, "--name", "two", "--out", str(tmp_path), "--no-plots"]) == 0
    page = _Page((tmp_path / "two" / "report.html").read_text())
    ids = {attrs["id"] for _, attrs in page.tags if "id" in attrs}
    links = [attrs["href"] for tag, attrs in page.tags if tag == "a"]
    assert len(links) >= 5 and all(link.removeprefix("#") in ids for link in links)
    markdown = (tmp_path / "two" / "report.md").read_text()
    overview = markdown.split("## Overview")[1].split("Regenerate")[0]
    assert overview.count("| teaching") == 0 and overview.count("[`teaching`]") == 2
    assert overview.count("[`poisson-short-tight-n60-s1`]") == 2 and "pool peak" in overview


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # workload paths above are relative to the repository


def test_a_long_list_of_breaches_keeps_the_banner_short() -> None:
    threshold = parse_threshold("p95_wait>+5%")
    changes = [MetricChange(f"w{i}", "continuous", "p95_wait", 10, 20) for i in range(12)]
    verdict = check_gate([threshold], Comparison("a", "b", tuple(changes), (), ()))
    warnings = [f"w{i}: limits differ" for i in range(5)]
    outcome, shown = banner(verdict, (), Subject("c", Provenance("0")), warnings)
    assert outcome == "failed" and shown.headline == "Gate failed: 12 breaches of 1 threshold"
    assert shown.table is not None and len(shown.table.rows) == BANNER_ROWS + 1
    assert shown.table.rows[-1][0] == "and 4 more breaches, listed below"
    assert [f for f in shown.facts if "limits differ" in f] == [
        "warning: w0: limits differ",
        "warning: w1: limits differ",
    ]
    assert "and 3 more of these, listed below" in shown.facts


def test_a_failed_benchmark_without_a_breach_is_incomplete_not_passed(tmp_path: Path) -> None:
    results = tmp_path / "asv"
    write_asv_run(results, "a" * 40, {"static": 19.6, "continuous": 7.0})
    write_asv_run(results, "b" * 40, {"static": 19.6, "continuous": None})
    argv = ["report", "--out", str(tmp_path), "--baseline", f"{results}@aaaa"]
    assert main([*argv, "--asv-results", f"{results}@bbbb", "--fail-on", "p95_wait>+5%"]) == 1
    page = _Page((tmp_path / "asv-report" / "report.html").read_text())
    assert page.title.startswith("Gate incomplete")
    assert ("section", {"class": "banner incomplete", "id": "verdict", "role": "status"}) in (
        page.tags
    )


@pytest.mark.slow
def test_a_2000_request_report_shows_who_waits_and_who_runs(tmp_path: Path) -> None:
    argv = ["report", "family:poisson-short-tight:2000", "--name", "big", "--out", str(tmp_path)]
    assert main(argv) == 0
    markdown = (tmp_path / "big" / "report.md").read_text()
    assert "](crowd-poisson-short-tight-n2000-s0.png)" in markdown
    assert "Top: requests waiting (arrived, not admitted) in each iteration" in markdown
    assert "a zoom on 40 requests in declared order (#981 to #1,020" in markdown
    assert "**Memory binds `continuous`**" in markdown
    assert "**Waits grow with the workload under `continuous`**" in markdown
