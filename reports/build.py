"""The report pipeline: run (or read) the figures, draw, compare, gate, write the folder.

The folder gets ``report.md``, ``report.html``, ``results.json`` and the PNG plots. Files of an
earlier report in the same folder that this one would not write (plots of a workload no longer
in it) are removed first, so the folder always shows one report; other files are left alone.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kvsched.checks.verdict.files import write_file
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import Workload

from .banner import HEADLINES, Subject
from .collect import CaseRun, results_of, run_cases
from .compare import compare
from .crowd import CROWD_FROM, DEFAULT_ZOOM, Zoom, plot_crowd
from .document import ReportContent, compose
from .figures import Plot
from .gantt import plot_membership
from .gate import Threshold, check_gate
from .plots import plot_pages, plot_waits
from .progress import Progress
from .provenance import current_provenance
from .render import to_html, to_markdown
from .results import ResultSet, write_results

OWN_FILES = ("report.md", "report.html", "results.json")
OWN_PLOTS = ("membership-*.png", "crowd-*.png", "pages-*.png", "waits-*.png")


def build_report(
    folder: Path,
    command: str,
    workloads: Sequence[Workload],
    policies: Mapping[str, SchedulerFactory],
    engine: str = "auto",
    candidate: ResultSet | None = None,
    baseline: ResultSet | None = None,
    thresholds: Sequence[Threshold] = (),
    teaching: Workload | None = None,
    progress: Progress | None = None,
    plots: bool = True,
    baseline_name: str = "",
    zoom: Zoom | None = DEFAULT_ZOOM,
) -> ReportContent:
    """Write the report into ``folder`` and return what it says.

    ``candidate`` given: report those figures (read from asv results) and run nothing.
    Otherwise run every workload under every policy. A threshold naming a metric the comparison
    lacks raises :class:`~.gate.ThresholdError` before anything is written.
    """
    progress = progress if progress is not None else Progress(sys.stderr)
    provenance = current_provenance()
    cases: tuple[CaseRun, ...] = ()
    if candidate is None:
        cases = run_cases(workloads, policies, engine, progress)
        candidate = replace(results_of(cases), provenance=provenance)
    comparison = compare(baseline, candidate) if baseline is not None else None
    incomplete = [
        f"{case.policy} on {case.workload.name} did not complete: {case.problem}"
        for case in cases
        if case.problem
    ]
    verdict = check_gate(thresholds, comparison, incomplete) if comparison and thresholds else None
    folder.mkdir(parents=True, exist_ok=True)
    _clear(folder)
    drawn = _draw(folder, cases, progress, zoom) if plots else ()
    content = ReportContent(
        name=folder.name,
        command=command,
        results=candidate,
        cases=cases,
        plots=drawn,
        comparison=comparison,
        verdict=verdict,
        teaching=teaching,
        subject=Subject(f"`{folder.name}`, {candidate.source}", provenance, baseline_name),
    )
    outcome, blocks = compose(content)
    write_file(folder / "report.md", to_markdown(blocks))
    title = f"{HEADLINES[outcome]} · kvsched report: {content.name}"
    write_file(folder / "report.html", to_html(blocks, title))
    write_results(candidate, folder / "results.json")
    return content


def _draw(
    folder: Path, cases: Sequence[CaseRun], progress: Progress, zoom: Zoom | None
) -> tuple[tuple[str, tuple[Plot, ...]], ...]:
    by_workload: dict[str, list[CaseRun]] = {}
    for case in cases:
        by_workload.setdefault(case.workload.name, []).append(case)
    if by_workload:
        progress.start("plots", len(by_workload))
    drawn = []
    for name, group in by_workload.items():
        many = len(group[0].workload.requests) > CROWD_FROM
        plots = [plot_crowd(group, folder, zoom) if many else plot_membership(group, folder)]
        if all(case.series is not None for case in group):
            plots.append(plot_pages(group, folder))
        plots.append(plot_waits(group, folder))
        drawn.append((name, tuple(plots)))
        progress.advance()
    if by_workload:
        progress.finish()
    return tuple(drawn)


def _clear(folder: Path) -> None:
    for pattern in (*OWN_FILES, *OWN_PLOTS):
        for path in folder.glob(pattern):
            path.unlink()
