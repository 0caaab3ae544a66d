"""The regression gate: strict thresholds, and planted regressions that must fail it.

An unchanged candidate passes; a candidate scheduler that is deliberately worse, a workload whose
P95 wait rises, and an asv run whose tracked figure regresses all exit 1.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from test_report import write_asv_run  # tests/ is on sys.path (rootdir insertion)

from kvsched.cli import main
from kvsched.reports.compare import MetricChange
from kvsched.reports.gate import ThresholdError, parse_threshold
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import workload_to_json

# Correct but worse: admits only into an empty batch, one request at a time (planted regression).
ONE_AT_A_TIME = """
from kvsched.reference.continuous import ContinuousScheduler


class OneAtATime(ContinuousScheduler):
    def can_admit(self, request):
        return not self.running and super().can_admit(request)
"""

# Never admits anyone: the run starves every request, and its partial figures (no waits at all)
# look better than any baseline's.
NEVER_ADMITS = """
from kvsched.reference.continuous import ContinuousScheduler


class NeverAdmits(ContinuousScheduler):
    def admission_open(self):
        return False
"""


@pytest.mark.parametrize(
    ("text", "metric", "rise", "limit", "percent"),
    [
        ("p95_wait>+5%", "p95_wait", True, 5.0, True),
        ("utilization<-5%", "utilization", False, 5.0, True),
        ("iterations>+3", "iterations", True, 3.0, False),
        (" p95_wait > +0.5 % ", "p95_wait", True, 0.5, True),
        ("peak_pages>+0", "peak_pages", True, 0.0, False),
    ],
)
def test_thresholds_parse(text: str, metric: str, rise: bool, limit: float, percent: bool) -> None:
    threshold = parse_threshold(text)
    assert (threshold.metric, threshold.rise, threshold.limit, threshold.percent) == (
        metric,
        rise,
        limit,
        percent,
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("p95_wait+5%", "has no '>' or '<'"),
        ("p95_wait>=+5%", "'=' is not part of a threshold"),
        ("p95_wait>>+5%", "more than one"),
        (">+5%", "names no metric"),
        ("p95 wait>+5%", "'p95 wait' is not a metric name"),
        ("p95_wait>", "has no limit"),
        ("p95_wait>5%", "the limit '5%' needs a sign"),
        ("p95_wait>-5%", "'>-' would fail on an unchanged result"),
        ("utilization<+5%", "'<+' would fail on an unchanged result"),
        ("p95_wait>+five%", "'five' is not a non-negative number"),
        ("p95_wait>+5%%", "'5%' is not a non-negative number"),
        ("p95_wait>+1e3", "'1e3' is not a non-negative number"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_part(text: str, named: str) -> None:
    with pytest.raises(ThresholdError, match=re.escape(named)):
        parse_threshold(text)


def test_limits_are_strict_and_a_rise_from_zero_is_infinite() -> None:
    def change(before: float, after: float) -> MetricChange:
        return MetricChange("w", "static", "p95_wait", before, after)

    five_percent = parse_threshold("p95_wait>+5%")
    assert not five_percent.breached_by(change(100, 105))  # exactly at the limit
    assert five_percent.breached_by(change(100, 105.5))
    assert not five_percent.breached_by(change(100, 50))  # an improvement
    assert math.isinf(change(0, 1).percent) and five_percent.breached_by(change(0, 1))
    assert not five_percent.breached_by(change(0, 0))
    fall = parse_threshold("utilization<-5%")
    assert fall.breached_by(change(0.8, 0.75)) and not fall.breached_by(change(0.8, 0.77))
    absolute = parse_threshold("iterations>+3")
    assert not absolute.breached_by(change(88, 91)) and absolute.breached_by(change(88, 92))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The teaching trace's report, as CI would keep it from the last good build."""
    out = tmp_path_factory.mktemp("baseline")
    assert main(["report", "--out", str(out), "--no-plots"]) == 0
    return out / "teaching"


def gate(baseline: Path, out: Path, *argv: str) -> int:
    return main(
        [
            "report",
            *argv,
            "--out",
            str(out),
            "--no-plots",
            "--baseline",
            str(baseline),
            "--fail-on",
            "p95_wait>+5%",
            "--fail-on",
            "utilization<-5%",
            "--fail-on",
            "iterations>+3",
        ]
    )


def test_an_unchanged_candidate_passes(baseline: Path, tmp_path: Path) -> None:
    assert gate(baseline, tmp_path) == 0
    markdown = " ".join((tmp_path / "teaching" / "report.md").read_text().split())
    assert "**Gate passed: no regression beyond 3 thresholds" in markdown
    assert re.search(
        r"\| teaching / static \| `p95_wait` \| ([0-9.]+) \| \1 \| 0 \| 0% \| ok \|", markdown
    )


def test_a_deliberately_worse_scheduler_fails_the_gate(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = tmp_path / "one_at_a_time.py"
    planted.write_text(ONE_AT_A_TIME)
    policies = f"continuous={planted}:OneAtATime"
    assert gate(baseline, tmp_path, "--policies", policies) == 1
    captured = capsys.readouterr()
    assert re.search(r"regression: teaching / continuous: iterations \d+ -> \d+", captured.err)
    assert "gate FAILED" in captured.out
    markdown = (tmp_path / "teaching" / "report.md").read_text()
    assert "**Gate failed: " in markdown and "**breach**" in markdown
    assert "Only in the baseline (not compared): `teaching / static`" in markdown
    assert "with the scheduler under test as continuous" in markdown


def test_a_run_that_starves_fails_the_gate_in_the_report_too(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = tmp_path / "never_admits.py"
    planted.write_text(NEVER_ADMITS)
    assert gate(baseline, tmp_path, "--policies", f"continuous={planted}:NeverAdmits") == 1
    captured = capsys.readouterr()
    assert "regression: continuous on teaching did not complete" in captured.err
    assert "gate FAILED" in captured.out
    markdown = " ".join((tmp_path / "teaching" / "report.md").read_text().split())
    assert "**Gate failed: " in markdown and "did not complete" in markdown


def test_a_workload_whose_p95_rises_fails_the_gate(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same trace, except that g and h arrive while d, e and f still decode.
    document = workload_to_json(load_teaching_trace())
    for request in document["requests"]:
        if request["id"] in ("g", "h"):
            request["arrival"] = 20
    crowded = tmp_path / "crowded.json"
    crowded.write_text(json.dumps(document))
    assert gate(baseline, tmp_path, str(crowded)) == 1
    err = capsys.readouterr().err
    assert "p95_wait" in err and "breaks 'p95_wait>+5%'" in err


def test_gate_refuses_a_metric_neither_side_has(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--out", str(tmp_path), "--no-plots", "--baseline", str(baseline)]
    assert main([*argv, "--fail-on", "latency>+5%"]) == 2
    assert "metric 'latency' is not in both" in capsys.readouterr().err
    assert not (tmp_path / "teaching").exists()


def test_gate_that_would_compare_nothing_is_refused(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "family:poisson-short-roomy:10:1", "--out", str(tmp_path), "--no-plots"]
    assert main([*argv, "--baseline", str(baseline), "--fail-on", "p95_wait>+5%"]) == 2
    assert "no case is in both results" in capsys.readouterr().err


def test_bad_threshold_on_the_command_line_exits_2(
    baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--out", str(tmp_path), "--baseline", str(baseline)]
    assert main([*argv, "--fail-on", "p95_wait>5%"]) == 2
    assert "--fail-on 'p95_wait>5%': the limit '5%' needs a sign" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path), "--fail-on", "p95_wait>+5%"]) == 2
    assert "--fail-on needs --baseline" in capsys.readouterr().err


def test_asv_results_gate_on_the_tracked_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "asv"
    write_asv_run(results, "a" * 40, {"static": 19.6, "continuous": 7.0})
    write_asv_run(results, "b" * 40, {"static": 19.6, "continuous": 7.0})
    write_asv_run(results, "c" * 40, {"static": 19.6, "continuous": 9.0})
    argv = ["report", "--out", str(tmp_path), "--baseline", f"{results}@aaaa"]
    same = [*argv, "--asv-results", f"{results}@bbbb", "--fail-on", "p95_wait>+5%"]
    assert main(same) == 0
    worse = [*argv, "--asv-results", f"{results}@cccc", "--fail-on", "p95_wait>+5%"]
    assert main(worse) == 1
    assert (
        "bench_teaching.Teaching / continuous: p95_wait 7 -> 9 (+28.6%)" in capsys.readouterr().err
    )


def test_a_benchmark_that_fails_in_the_candidate_fails_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # asv records None for a benchmark that raised; a crash must not pass for "no regression".
    results = tmp_path / "asv"
    write_asv_run(results, "a" * 40, {"static": 19.6, "continuous": 7.0})
    write_asv_run(results, "b" * 40, {"static": 19.6, "continuous": None})
    argv = ["report", "--out", str(tmp_path), "--baseline", f"{results}@aaaa"]
    assert main([*argv, "--asv-results", f"{results}@bbbb", "--fail-on", "p95_wait>+5%"]) == 1
    err = capsys.readouterr().err
    assert "bench_teaching.Teaching / continuous: p95_wait has no value in the candidate" in err
    markdown = " ".join((tmp_path / "asv-report" / "report.md").read_text().split())
    assert "No value (the benchmark failed): `bench_teaching.Teaching / continuous`" in markdown
