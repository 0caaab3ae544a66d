"""``kvsched bench``: the asv comparison end to end, so that it cannot rot unnoticed.

The end-to-end test copies this working tree into a throwaway repository, commits it as the
base, plants a regression in the working tree of the copy and runs ``kvsched bench --quick``:
real asv runs of both, offline, in this environment. The gate must fail on the planted
regression and only there. The other tests read canned ``asv compare`` output.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kvsched.cli import main
from kvsched.reports.bench.verdict import parse_compare

REPO = Path(__file__).resolve().parents[2]
IDENTITY = ["-c", "user.name=kvsched tests", "-c", "user.email=tests@kvsched.invalid"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(where: Path, *arguments: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), *arguments], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A repository whose one commit is this working tree (tracked and unignored files)."""
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in set(listed.split("\0")) - {""}:
        if (REPO / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tmp_path / name)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "--all")
    git(tmp_path, *IDENTITY, "commit", "-q", "--no-verify", "-m", "base")
    return tmp_path


def test_quick_bench_fails_on_a_planted_regression(
    project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Planted: continuous batching admits only while fewer than two requests run, so the
    # teaching trace's third slot idles and its continuous figures get worse (its iteration
    # count happens to stay 88: the last request still ends the run).
    policy = project_copy / "reference" / "continuous.py"
    source = policy.read_text(encoding="utf-8")
    assert source.count("return True") == 1
    policy.write_text(source.replace("return True", "return len(self.running) < 2"))

    code = main(["bench", "--quick", "--repo", str(project_copy)])
    out = capsys.readouterr().out

    assert code == 1, out
    assert "WORSE   teaching.TeachingTrace.track_p95_wait('continuous')" in out
    assert "WORSE   teaching.TeachingTrace.track_utilization('continuous')" in out
    # Static batching never calls the changed method's answer into question: unchanged.
    assert "track_iterations('static')" not in out


def test_unknown_base_is_a_usage_error(
    project_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--quick", "--repo", str(project_copy), "--base", "nope"]) == 2
    assert "'nope' is not a commit" in capsys.readouterr().err


# What asv 0.6.6's `asv compare --split` prints (abridged, columns narrowed), as the gate reads it.
COMPARE = """
Benchmarks that have improved:

| Change | Before [1c69599e] | After [9019de90] | Ratio | Benchmark (Parameter) |
|---|---|---|---|---|
| - | 0.611594 | 0.5 | 0.82 | teaching.TeachingTrace.track_utilization('static') |
| - | 19.6 | 7 | 0.36 | teaching.TeachingTrace.track_p95_wait('static') |
| - | 2.10±0.1s | 1.50±0.1s | 0.71 | speed.EngineLoop.time_stepped('static') |

Benchmarks that have stayed the same:

| Change | Before [1c69599e] | After [9019de90] | Ratio | Benchmark (Parameter) |
|---|---|---|---|---|
|   | 88 | 88 | 1.00 | teaching.TeachingTrace.track_iterations('continuous') |

Benchmarks that have got worse:

| Change | Before [1c69599e] | After [9019de90] | Ratio | Benchmark (Parameter) |
|---|---|---|---|---|
| + | 116 | 120 | 1.03 | teaching.TeachingTrace.track_iterations('static') |
| + | 0.5 | 0.6 | 1.20 | teaching.TeachingTrace.track_utilization('continuous') |
| ! | 24 | failed | n/a | families.Stepped.track_peak_pages('poisson-long-roomy', 100, 'static') |
| + | 1.00±0s | 3.00±0s | 3.00 | speed.ScaleReplay.time_replay('static') |
| + | 300 | 200 | 0.67 | speed.EngineLoop.track_speedup('static') |
"""


def test_compare_rows_and_which_are_worse() -> None:
    rows = {row.name: row for row in parse_compare(COMPARE)}
    assert len(rows) == 9
    worse = {name for name, row in rows.items() if row.gated and row.worse}
    assert worse == {
        "teaching.TeachingTrace.track_utilization('static')",  # utilization fell
        "teaching.TeachingTrace.track_iterations('static')",  # iterations rose
        "families.Stepped.track_peak_pages('poisson-long-roomy', 100, 'static')",  # now fails
    }
    # Timing and the speed-up ratio are information only, however much they moved.
    assert not rows["speed.ScaleReplay.time_replay('static')"].gated
    assert not rows["speed.EngineLoop.track_speedup('static')"].gated
    assert rows["teaching.TeachingTrace.track_iterations('continuous')"].mark == ""
