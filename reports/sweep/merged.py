"""A sweep's merged report: every cell's result in grid order, as JSON and as a table.

The JSON holds nothing about how or where the cells ran (no times, hosts or worker counts), so
the same grid gives the same bytes from the local pool and from a cluster, which is what the
sweep's tests compare.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from tabulate import tabulate

from .cell import CellResult

SWEEP_KIND = "kvsched-sweep"
SWEEP_FORMAT = 1
COLUMNS = {
    "iterations": "iterations",
    "utilization": "utilization",
    "p95_wait": "P95 wait",
    "peak_pages": "peak pages",
    "preemptions": "preemptions",
}
"""The figures the table shows, of those every cell's JSON holds."""


class SweepReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    kind: str
    format: int
    grid: str
    cells: list[CellResult]
    findings: int
    """Cells with a finding: the gate fails when this is not 0."""


def merged(grid: str, results: Sequence[CellResult]) -> SweepReport:
    findings = sum(1 for result in results if result.finding)
    return SweepReport(SWEEP_KIND, SWEEP_FORMAT, grid, list(results), findings)


def report_json(report: SweepReport) -> bytes:
    return msgspec.json.format(msgspec.json.encode(report)) + b"\n"


def render_table(report: SweepReport) -> str:
    rows = []
    for result in report.cells:
        cell = result.cell
        figures = [_shown(result.metrics.get(name)) for name in COLUMNS]
        limits = str(cell.limits) if cell.limits_key else ""
        rows.append((result.workload_name, limits, cell.scheduler, _verdict(result), *figures))
    headers = ["workload", "limits", "scheduler", "verdict", *COLUMNS.values()]
    table = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    cells = len(report.cells)
    if report.findings:
        summary = f"{report.findings} of {cells} cells have a finding: the sweep fails"
        details = [f"  {r.cell.label}: {r.finding}" for r in report.cells if r.finding]
        return "\n".join([table, "", summary, *details])
    return f"{table}\n\nall {cells} cells clean: every applicable invariant held"


def _verdict(result: CellResult) -> str:
    return result.invariant if result.finding else "ok"


def _shown(value: float | None) -> str:
    if value is None:
        return ""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}"
