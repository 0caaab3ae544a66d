"""`kvsched report --history`: figures over commits from earlier reports' results.json files.

Reading asv results over commits is tests/cover/test_like_with_like.py; the planted figures here
stand for what reports kept by CI at successive commits would hold.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvsched.cli import main
from kvsched.reports.history import read_history
from kvsched.reports.provenance import Provenance
from kvsched.reports.results import CaseResult, ResultSet, read_results, write_results

COMMITS = ("1111111", "2222222", "3333333", "4444444")


def _keep(folder: Path, commit: str, day: int, p95: float, dirty: bool = False) -> None:
    """The results.json a CI run at ``commit`` would have kept, on day ``day``."""
    case = CaseResult("w", "continuous", {"p95_wait": p95, "iterations": 88.0}, {})
    provenance = Provenance("0.1.0", commit * 5 + "aaaaa", dirty, f"2026-01-{day:02d}T00:00:00Z")
    (folder / commit).mkdir(parents=True)
    write_results(
        ResultSet("runs", (case,), provenance=provenance), folder / commit / "results.json"
    )


@pytest.fixture
def kept(tmp_path: Path) -> Path:
    folder = tmp_path / "kept"
    # Written out of order: the history orders by the time each report recorded.
    _keep(folder, COMMITS[2], 3, 9.0)
    _keep(folder, COMMITS[0], 1, 7.0)
    _keep(folder, COMMITS[3], 4, 9.2, dirty=True)
    _keep(folder, COMMITS[1], 2, 7.0)
    return folder


def test_history_orders_by_recorded_time_and_marks_moves(kept: Path) -> None:
    (history,) = read_history(kept, ["p95_wait"])
    assert history.commits == ("11111111", "22222222", "33333333", "44444444+")
    assert history.series["w / continuous"] == (7.0, 7.0, 9.0, 9.2)
    assert history.moved == (("w / continuous", 2), ("w / continuous", 3))


def test_history_with_a_threshold_marks_only_moves_beyond_it(
    kept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["report", "--history", str(kept), "--out", str(out), "--fail-on", "p95_wait>+5%"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 commits" in printed
    assert re.findall(r"moved: .*", printed) == ["moved: p95_wait of w / continuous at 33333333"]
    markdown = (out / "history" / "history.md").read_text()
    assert re.search(
        r"\| w / continuous \| +7\.00 \| +7\.00 \| +\*\*9\.00\*\* \| +9\.20 \|", markdown
    )
    assert "Moved at 1 commit: `33333333` (w / continuous)." in markdown
    page = (out / "history" / "history.html").read_text()
    assert page.count('<img src="data:image/png;base64,') == 1
    assert (out / "history" / "history-p95_wait.png").read_bytes().startswith(b"\x89PNG")


def test_reports_record_their_provenance_and_history_reads_real_ones(tmp_path: Path) -> None:
    for name in ("first", "second", "third"):
        argv = ["report", "--out", str(tmp_path / "kept"), "--name", name, "--no-plots"]
        assert main(argv) == 0
    recorded = read_results(tmp_path / "kept" / "first" / "results.json").provenance
    assert recorded is not None and recorded.version and recorded.time.endswith("Z")
    histories = read_history(tmp_path / "kept", ["iterations", "p95_wait"])
    assert [len(h.commits) for h in histories] == [3, 3]
    assert all(not h.moved for h in histories)  # the same code thrice: nothing moves


@pytest.mark.parametrize(
    ("made", "why"),
    [
        (True, "no asv run files and no results.json files"),
        (False, "no such folder of asv results or report results"),
    ],
)
def test_history_of_nothing_exits_2_saying_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], made: bool, why: str
) -> None:
    """As the README's `kvsched report --history .asv/results` does in a fresh clone: the error
    names the folder and teaches the asv commands that fill it."""
    folder = tmp_path / ".asv" / "results"
    if made:
        folder.mkdir(parents=True)
    assert main(["report", "--history", str(folder)]) == 2
    said = capsys.readouterr().err
    assert f"--history {folder}: {why}\n" in said
    assert "asv machine --yes" in said
    assert "asv run --python=same --set-commit-hash=HEAD" in said
