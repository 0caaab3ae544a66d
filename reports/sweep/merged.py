"""A sweep's merged report: every cell's result in grid order, as JSON and as tables.

The JSON holds nothing about how or where the cells ran (no times, hosts or worker counts), so
the same grid gives the same bytes from the local pool and from a cluster, which is what the
sweep's tests compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import msgspec

from kvsched.reports import numbers
from kvsched.reports.results import EFFICIENCY_UNITS, RUN_METRIC_UNITS
from kvsched.reports.text_table import text_table

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
    """The cells as one table per workload and limits (in grid order), then the findings.

    The figures are written as a report writes them (:mod:`kvsched.reports.numbers`), a column
    sharing its decimals. A cell whose run has a finding, or whose figures are partial, shows
    none: its verdict says why, and the lines under the tables say what was found.
    """
    figures = _figures(report)
    headers = ["scheduler", "verdict", *COLUMNS.values()]
    align = ["left", "left", *("right" for _ in COLUMNS)]
    sections = []
    for caption, group in groupby(report.cells, key=_caption):
        rows = [
            (r.cell.scheduler, _verdict(r), *(figures[name].get(r.key, "") for name in COLUMNS))
            for r in group
        ]
        sections.append(f"{caption}\n{text_table(rows, headers, align)}")
    cells = len(report.cells)
    if report.findings:
        summary = f"{report.findings} of {cells} cells have a finding: the sweep fails"
    else:
        summary = f"all {cells} cells clean: every applicable invariant held"
    troubles = [f"  {r.cell.label}: {r.finding or r.problem}" for r in report.cells if _failed(r)]
    return "\n\n".join([*sections, "\n".join([summary, *troubles])])


_UNITS = RUN_METRIC_UNITS | EFFICIENCY_UNITS


def _figures(report: SweepReport) -> dict[str, dict[str, str]]:
    """Per column, the figure of each cell that shows figures, by the cell's key; a column
    shares its decimals, as a row of a report's table does."""
    figures = {}
    for name in COLUMNS:
        shown = [r for r in report.cells if not _failed(r) and name in r.metrics]
        texts = numbers.values([float(r.metrics[name]) for r in shown], _UNITS.get(name, ""))
        figures[name] = {r.key: text for r, text in zip(shown, texts, strict=True)}
    return figures


def _caption(result: CellResult) -> str:
    limits = f" ({result.cell.limits})" if result.cell.limits_key else ""
    return f"{result.workload_name}{limits}, {numbers.counted(result.requests, 'request')}:"


def _failed(result: CellResult) -> bool:
    """A finding, or figures the run left partial (a scheduler fault, a run that did not drain)."""
    return bool(result.finding or result.problem)


def _verdict(result: CellResult) -> str:
    if result.finding:
        return result.invariant
    return "no figures" if result.problem else "ok"
