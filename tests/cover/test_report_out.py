"""``kvsched report`` writes where it is told, else to a new folder it names: never over files.

Run from the repository root without ``--out``, it once rewrote the committed reports/teaching/;
now only ``--name teaching --out reports`` does, which says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsched.cli import main


def test_without_out_each_report_gets_a_new_folder_named_in_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports" / "teaching").mkdir(parents=True)
    (tmp_path / "reports" / "teaching" / "report.md").write_text("committed\n")
    for folder in ("kvsched-report-teaching", "kvsched-report-teaching-2"):
        assert main(["report", "--no-plots"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"wrote {folder}/report.md and {folder}/report.html"), out
        assert (tmp_path / folder / "results.json").is_file()
    assert (tmp_path / "reports" / "teaching" / "report.md").read_text() == "committed\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "kvsched-report-teaching",
        "kvsched-report-teaching-2",
        "reports",
    ]
