"""Figures over commits: asv runs, or earlier reports' results.json files, in commit order.

``kvsched report --history SOURCE --metric p95_wait`` reads either every run file of an asv
results tree (:mod:`.asv_results` reads one), ordered by the commit date asv recorded, or every
``results.json`` under a folder (one per earlier report, e.g. kept by CI per commit), ordered by
the time their provenance records, labelled by its commit (the folder's name for files written
before reports recorded one). Each chosen metric of every case becomes a line over the commits.
A commit is marked where a figure moved from the commit before: beyond a ``--fail-on``
threshold when thresholds are given, by any amount otherwise. Only deterministic figures make a
meaningful history; times show the machine's load as much as the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .asv_results import is_asv_results, read_asv_results
from .compare import MetricChange
from .gate import Threshold
from .results import ResultsError, ResultSet, load_json_object, read_results

_NOT_RUNS = {"machine.json", "benchmarks.json"}


class NoHistory(ResultsError):
    """The folder holds no run at all (missing, or empty): a history has to be made first."""


@dataclass(frozen=True)
class History:
    """One metric over commits: per case label, the value at each commit (None: not measured)."""

    metric: str
    commits: tuple[str, ...]
    """Short commit hashes (or folder names), oldest first."""
    series: dict[str, tuple[float | None, ...]]
    moved: tuple[tuple[str, int], ...] = ()
    """(case label, commit index) where the figure moved from the commit before."""
    unit: str = ""


def read_history(
    folder: Path, metrics: Sequence[str], thresholds: Sequence[Threshold] = ()
) -> list[History]:
    """Each metric of ``metrics`` over every run under ``folder`` (asv results or reports)."""
    if not folder.is_dir():
        raise NoHistory(f"{folder}: no such folder of asv results or report results")
    labelled = _asv_runs(folder) if is_asv_results(folder) else _report_runs(folder)
    if not labelled:
        raise NoHistory(f"{folder}: no asv run files and no results.json files")
    commits = tuple(label for label, _ in labelled)
    results = [result for _, result in labelled]
    histories = []
    for metric in metrics:
        labels = dict.fromkeys(
            case.label for result in results for case in result.cases if metric in case.metrics
        )
        if not labels:
            raise ResultsError(f"{folder}: no run has a figure named '{metric}'")
        series = {
            label: tuple(
                next((c.metrics[metric] for c in r.cases if c.label == label), None)
                for r in results
            )
            for label in labels
        }
        unit = next((c.units[metric] for r in results for c in r.cases if metric in c.units), "")
        gated = [t for t in thresholds if t.metric == metric]
        moved = tuple(
            (label, index)
            for label, values in series.items()
            for index in range(1, len(values))
            if _moved(values[index - 1], values[index], metric, gated)
        )
        histories.append(History(metric, commits, series, moved, unit))
    return histories


def _moved(before: float | None, after: float | None, metric: str, gated: list[Threshold]) -> bool:
    if before is None or after is None:
        return False
    if not gated:
        return before != after
    change = MetricChange("", "", metric, before, after)
    return any(threshold.breached_by(change) for threshold in gated)


def _asv_runs(folder: Path) -> list[tuple[str, ResultSet]]:
    runs = []
    for path in sorted(folder.rglob("*.json")):
        if path.name in _NOT_RUNS:
            continue
        document = load_json_object(path)
        if "result_columns" in document:
            date = document.get("date")
            runs.append((date if isinstance(date, int) else 0, str(document["commit_hash"]), path))
    runs.sort()
    return [(commit[:8], read_asv_results(path)) for _, commit, path in runs]


def _report_runs(folder: Path) -> list[tuple[str, ResultSet]]:
    keyed = []
    for path in sorted(folder.rglob("results.json")):
        result = read_results(path)
        p = result.provenance
        label = path.parent.name
        if p is not None and p.commit:
            label = p.commit[:8] + ("+" if p.dirty else "")
        keyed.append(((p.time if p else "", path.parent.name), label, result))
    keyed.sort(key=lambda item: item[0])
    return [(label, result) for _, label, result in keyed]
