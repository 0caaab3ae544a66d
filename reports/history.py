"""Figures over commits: every asv run of a results tree, in commit order, as a table and plots.

``kvsched report --history RESULTS --metric p95_wait`` reads each run file of an asv results
tree (:mod:`.asv_results` reads one), orders the runs by the commit date asv recorded, and draws
each chosen metric of every case as a line over the commits. Only the deterministic ``track_*``
figures make a meaningful history; times drawn over commits show the machine's load as much as
the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .asv_results import read_asv_results
from .figures import new_figure, report_style, save_png, slug
from .results import ResultsError, load_json_object

_NOT_RUNS = {"machine.json", "benchmarks.json"}


@dataclass(frozen=True)
class History:
    """One metric over commits: per case label, the value at each commit (None: not measured)."""

    metric: str
    commits: tuple[str, ...]
    """Short commit hashes, oldest first."""
    series: dict[str, tuple[float | None, ...]]


def read_history(folder: Path, metrics: Sequence[str]) -> list[History]:
    """Each metric of ``metrics`` over every run in the asv results tree ``folder``."""
    if not folder.is_dir():
        raise ResultsError(f"{folder}: no such asv results folder")
    runs = []
    for path in sorted(folder.rglob("*.json")):
        if path.name in _NOT_RUNS:
            continue
        document = load_json_object(path)
        if "result_columns" in document:
            date = document.get("date")
            runs.append((date if isinstance(date, int) else 0, str(document["commit_hash"]), path))
    if not runs:
        raise ResultsError(f"{folder}: no asv run files")
    runs.sort()
    results = [read_asv_results(path) for _, _, path in runs]
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
        histories.append(History(metric, tuple(c[:8] for _, c, _ in runs), series))
    return histories


def history_markdown(histories: Sequence[History], plots: Sequence[str]) -> str:
    lines = ["# kvsched history", ""]
    for history, plot in zip(histories, plots, strict=True):
        lines += [f"## `{history.metric}` over {len(history.commits)} commits", ""]
        lines.append("| case | " + " | ".join(history.commits) + " |")
        lines.append("|---" * (len(history.commits) + 1) + "|")
        for label, values in history.series.items():
            shown = ("-" if v is None else f"{v:g}" for v in values)
            lines.append(f"| {label} | " + " | ".join(shown) + " |")
        lines += ["", f"![{history.metric}]({plot})", ""]
    return "\n".join(lines)


def plot_history(history: History, folder: Path) -> str:
    """Draw one metric over commits; returns the PNG's file name."""
    name = f"history-{slug(history.metric)}.png"
    with report_style():
        figure = new_figure(8, 3.5)
        ax = figure.subplots()
        positions = range(len(history.commits))
        for label, values in history.series.items():
            points = [(x, v) for x, v in zip(positions, values, strict=True) if v is not None]
            ax.plot([x for x, _ in points], [v for _, v in points], marker="o", label=label)
        ax.set_xticks(list(positions), history.commits, rotation=45, ha="right")
        ax.set_ylabel(history.metric)
        ax.legend(fontsize="small")
        save_png(figure, folder / name)
    return name


def write_history(histories: Sequence[History], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    plots = [plot_history(history, folder) for history in histories]
    path = folder / "history.md"
    path.write_text(history_markdown(histories, plots), encoding="utf-8")
    return path
