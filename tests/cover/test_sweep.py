"""``kvsched sweep``: the grid file, one checked and measured run per cell, resume and the gate.

The cluster half (a Dask LocalCluster) is tests/cover/test_sweep_cluster.py, in a CI step of its
own.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from sweep_grids import write_grid

from kvsched.cli import main
from kvsched.reference import POLICIES
from kvsched.reference.families import generate
from kvsched.reports import numbers
from kvsched.reports.collect import run_case
from kvsched.reports.sweep import load_grid, run_cell
from kvsched.reports.sweep.store import CELLS
from kvsched.reports.text_table import WIDTH
from kvsched.spec.teaching import TEACHING_TRACE


def sweep(grid: Path, out: Path, *options: str) -> int:
    return main(["sweep", str(grid), "--out", str(out), "--format", "json", *options])


def test_a_grid_is_its_product_and_each_cell_is_what_report_measures(tmp_path: Path) -> None:
    grid = load_grid(write_grid(tmp_path))
    assert len(grid.cells) == 2 * 2 * 2
    assert len({cell.key for cell in grid.cells}) == 8
    cell = next(c for c in grid.cells if c.scheduler == "static")
    workload = generate("bursty-short-tight", 24, 0)
    assert cell.workload == "family:bursty-short-tight:24:0"
    result = run_cell(cell)
    assert result.finding == ""
    assert result.metrics == run_case(workload, "static", POLICIES["static"]).result.metrics


def test_the_pool_gives_what_one_process_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = write_grid(tmp_path)
    assert sweep(grid, tmp_path / "one") == 0
    assert sweep(grid, tmp_path / "pool", "--jobs", "2") == 0
    one = (tmp_path / "one" / "sweep.json").read_bytes()
    assert one == (tmp_path / "pool" / "sweep.json").read_bytes()
    report = json.loads(one)
    assert report["findings"] == 0 and len(report["cells"]) == 8
    assert "running 8 on a pool of 2 processes" in capsys.readouterr().err


def test_a_rerun_runs_only_the_missing_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid, out = write_grid(tmp_path), tmp_path / "out"
    assert sweep(grid, out) == 0
    first = (out / "sweep.json").read_bytes()
    stored = sorted((out / CELLS).glob("*.json"))
    assert len(stored) == 8
    # An interrupted sweep: three cells never stored, one stored but damaged.
    for path in stored[:3]:
        path.unlink()
    stored[3].write_text('{"format": 1', encoding="utf-8")
    capsys.readouterr()
    assert sweep(grid, out) == 0
    err = capsys.readouterr().err
    assert "8 cells, 4 already in" in err and "running 4 on this process" in err
    assert f"{stored[3]}: not a stored cell" in err
    assert (out / "sweep.json").read_bytes() == first
    assert sweep(grid, out) == 0
    assert "running 0" in capsys.readouterr().err


def test_a_workload_file_is_known_by_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(TEACHING_TRACE, tmp_path / folder / "trace.json")
    text = 'policies = ["continuous"]\nworkloads = ["a/trace.json"]\n'
    grid, out = write_grid(tmp_path, text), tmp_path / "out"
    assert sweep(grid, out) == 0
    write_grid(tmp_path, text.replace("a/", "b/"))
    capsys.readouterr()
    assert sweep(grid, out) == 0
    assert "1 already in" in capsys.readouterr().err  # moved, same bytes: resumed
    trace = json.loads((tmp_path / "b" / "trace.json").read_text(encoding="utf-8"))
    trace["requests"][0]["output_tokens"] += 1
    (tmp_path / "b" / "trace.json").write_text(json.dumps(trace), encoding="utf-8")
    assert sweep(grid, out) == 0
    assert "0 already in" in capsys.readouterr().err  # changed: a new cell


BUGGY = """\
from kvsched.checks.mutants.batching import DropsARequest as Buggy
from kvsched.reference.continuous import ContinuousScheduler as Fine
"""


@pytest.mark.parametrize(("name", "code"), [("Buggy", 1), ("Fine", 0)])
def test_a_cell_with_a_finding_fails_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, code: int
) -> None:
    (tmp_path / "mine.py").write_text(BUGGY, encoding="utf-8")
    text = (
        'policies = ["continuous"]\nworkloads = ["trace.json"]\n'
        f'[[targets]]\nname = "mine"\ntarget = "mine.py:{name}"\npolicy = "continuous"\n'
    )
    shutil.copy(TEACHING_TRACE, tmp_path / "trace.json")
    out = tmp_path / "out"
    assert main(["sweep", str(write_grid(tmp_path, text)), "--out", str(out)]) == code
    report = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    verdicts = {c["cell"]["scheduler"]: c["invariant"] for c in report["cells"]}
    assert verdicts == {"continuous": "", "mine": "REQ-2" if code else ""}
    assert report["findings"] == code
    shown = capsys.readouterr().out
    assert ("1 of 2 cells have a finding" in shown) == bool(code)
    # A failed cell shows no figures, only the rule it broke; the finding is said below.
    row = next(line.split() for line in shown.splitlines() if line.startswith("mine "))
    assert row == ["mine", "REQ-2"] if code else row[:2] == ["mine", "ok"] and len(row) == 7
    assert ("trace.json / mine: REQ-2 (iteration" in shown) == bool(code)


def test_the_table_writes_figures_as_a_report_does_and_fits_100_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run whose P95 wait is not whole (215.1, once written 215.100) beside one whose is.
    text = (
        'policies = ["static", "continuous"]\n[[families]]\nname = "bursty-short-tight"\n'
        "size = 60\n[[limits]]\nbatch_limit = 4\n"
    )
    out = tmp_path / "out"
    assert main(["sweep", str(write_grid(tmp_path, text)), "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert max(len(line) for line in shown.splitlines()) <= WIDTH
    cells = json.loads((out / "sweep.json").read_text(encoding="utf-8"))["cells"]
    # A column shares its decimals, as a row of a report's table does: the P95 waits here are
    # not all whole, so every one has two decimals.
    p95 = numbers.values([c["metrics"]["p95_wait"] for c in cells])
    assert any(not float(c["metrics"]["p95_wait"]).is_integer() for c in cells)
    lines = shown.splitlines()
    rows = [line.split() for line in lines if line.startswith(("static ", "continuous "))]
    assert len(rows) == len(cells)
    for row, cell, wait in zip(rows, cells, p95, strict=True):
        metrics = cell["metrics"]
        assert row[:2] == [cell["cell"]["scheduler"], "ok"]
        assert row[3] == numbers.percent(metrics["utilization"]) and row[3].endswith("%")
        assert row[4] == wait and re.fullmatch(r"[\d,]+\.\d\d", wait)
        assert row[2] == numbers.count(metrics["iterations"])


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('policie = ["static"]', "unknown field `policie`"),
        ('policies = ["static"]\nseeds = [0, "1"]', "`$.seeds[1]`"),
        ('policies = ["fifo"]\n', "policies[0]: 'fifo' is not a reference policy"),
        ('configs = ["vllm"]\n', "configs[0]: 'vllm' is not an engine configuration"),
        ('policies = ["static"]\nworkloads = ["missing.json"]', "workloads[0]: cannot read"),
        ('policies = ["static"]\n', "workloads: the grid names no workload"),
        ('[[families]]\nname = "bursty-short-tight"\nsize = 4', "the grid names no scheduler"),
        (
            'policies = ["static"]\n[[families]]\nname = "bursty"\nsize = 4',
            "families[0].name: unknown workload family 'bursty'",
        ),
        ('policies = ["static", "static"]', "policies[1]: repeats policies[0]"),
        ('policies = ["static"', "not valid TOML"),
        (
            'policies = ["static"]\n[[targets]]\nname = "x"\ntarget = "pkg.mod:X"',
            "targets[0].target: write file.py:Class",
        ),
        (
            'policies = ["static"]\n[[targets]]\nname = "static"\ntarget = "x.py:X"',
            "targets[0].name: 'static' is taken",
        ),
        (
            'workloads = ["trace.json"]\npolicies = ["static"]\n[[limits]]\npool_pages = 2',
            "limits[0]: request #0 ('a'): needs 4 pages at its peak",
        ),
    ],
)
def test_an_invalid_grid_exits_2_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    shutil.copy(TEACHING_TRACE, tmp_path / "trace.json")
    grid = write_grid(tmp_path, text)
    assert sweep(grid, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert str(grid) in err and said in err, err


def test_a_cell_that_cannot_be_stored_is_no_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / CELLS).write_text("a file where the cells' folder goes", encoding="utf-8")
    assert sweep(write_grid(tmp_path), out) == 5
    assert f"cannot write {out / CELLS}" in capsys.readouterr().err


def test_a_cluster_without_dask_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed
    assert sweep(write_grid(tmp_path), tmp_path / "out", "--cluster", "tcp://127.0.0.1:1") == 2
    assert "pip install 'kvsched[cluster]'" in capsys.readouterr().err
