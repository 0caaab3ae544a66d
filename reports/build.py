"""The report pipeline: run (or read) the figures, draw, compare, gate, write the folder.

The folder gets ``report.md``, ``report.html``, ``results.json`` and the PNG plots. Files of an
earlier report in the same folder that this one would not write (plots of a workload no longer
in it) are removed first, so the folder always shows one report; other files are left alone.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import Workload

from .collect import CaseRun, results_of, run_cases
from .compare import compare
from .document import ReportContent, compose
from .figures import Plot
from .gantt import plot_membership
from .gate import Threshold, check_gate
from .plots import plot_pages, plot_waits
from .progress import Progress
from .render import to_html, to_markdown
from .results import ResultSet, write_results

OWN_FILES = ("report.md", "report.html", "results.json")
OWN_PLOTS = ("membership-*.png", "pages-*.png", "waits-*.png")


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
) -> ReportContent:
    """Write the report into ``folder`` and return what it says.

    ``candidate`` given: report those figures (read from asv results) and run nothing.
    Otherwise run every workload under every policy. A threshold naming a metric the comparison
    lacks raises :class:`~.gate.ThresholdError` before anything is written.
    """
    progress = progress if progress is not None else Progress(sys.stderr)
    cases: tuple[CaseRun, ...] = ()
    if candidate is None:
        cases = run_cases(workloads, policies, engine, progress)
        candidate = results_of(cases)
    comparison = compare(baseline, candidate) if baseline is not None else None
    incomplete = [
        f"{case.policy} on {case.workload.name} did not complete: {case.problem}"
        for case in cases
        if case.problem
    ]
    verdict = check_gate(thresholds, comparison, incomplete) if comparison and thresholds else None
    folder.mkdir(parents=True, exist_ok=True)
    _clear(folder)
    drawn = _draw(folder, cases, progress) if plots else ()
    content = ReportContent(
        name=folder.name,
        command=command,
        results=candidate,
        cases=cases,
        plots=drawn,
        comparison=comparison,
        verdict=verdict,
        teaching=teaching,
    )
    blocks = compose(content)
    (folder / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
    title = f"kvsched report: {content.name}"
    (folder / "report.html").write_text(to_html(blocks, title), encoding="utf-8")
    write_results(candidate, folder / "results.json")
    return content


def _draw(
    folder: Path, cases: Sequence[CaseRun], progress: Progress
) -> tuple[tuple[str, tuple[Plot, ...]], ...]:
    by_workload: dict[str, list[CaseRun]] = {}
    for case in cases:
        by_workload.setdefault(case.workload.name, []).append(case)
    if by_workload:
        progress.start("plots", len(by_workload))
    drawn = []
    for name, group in by_workload.items():
        plots = [plot_membership(group, folder)]
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
