"""The history page: per metric, a plot over commits and the table behind it, moves marked.

Written as ``history.md`` and a self-contained ``history.html`` (:mod:`.render`), with one PNG
per metric beside them. A marked commit is one where the figure moved from the commit before
(:mod:`.history` decides which), ringed in the plot and in bold in the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvsched.checks.verdict.files import write_file

from . import numbers
from .figures import IDLE_COLOUR, Plot, new_figure, policy_colour, report_style, save_png, slug
from .gate import Threshold
from .history import History
from .render import Block, Bullets, Heading, Image, Paragraph, Table, to_html, to_markdown

SMALL_MULTIPLES_FROM = 7
"""From this many cases each gets a panel of its own: one plot of many lines needs more colours
than the eye tells apart and a legend longer than the plot."""
COLUMNS = 4
"""Panels per row of the small multiples."""


def plot_history(history: History, folder: Path) -> Plot:
    """Draw one metric over commits, moved commits ringed: one plot, or a panel per case."""
    name = f"history-{slug(history.metric)}.png"
    many = len(history.series) >= SMALL_MULTIPLES_FROM
    with report_style():
        figure = _panels(history) if many else _one_plot(history)
        png = save_png(figure, folder / name)
    what = (
        "one panel per case, the cases that moved most first, each on its own scale"
        if many
        else "one line per case"
    )
    caption = (
        f"`{history.metric}` at each of {numbers.counted(len(history.commits), 'commit')}, "
        f"{what}; a red ring marks a commit where the figure moved from the one before."
    )
    return Plot(name, f"{history.metric} over commits", caption, png)


def _colour(label: str, order: int, lines: int) -> str:
    if lines <= 2:
        return policy_colour(label.rpartition(" / ")[2], order)
    from matplotlib import colormaps

    red, green, blue, _ = colormaps["tab10"](order % 10)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def _one_plot(history: History) -> Any:
    figure = new_figure(max(8.0, 0.5 * len(history.commits) + 4), 4.2)
    ax = figure.subplots()
    for order, (label, values) in enumerate(history.series.items()):
        colour = _colour(label, order, len(history.series))
        _draw(ax, history, label, values, colour)
        ax.plot([], [], marker="o", color=colour, label=label)
    if history.moved:
        ax.scatter([], [], s=180, facecolors="none", edgecolors=IDLE_COLOUR, label="moved")
    ax.set_xticks(range(len(history.commits)), history.commits, rotation=45, ha="right")
    ax.set_xlabel("commit, oldest first")
    ax.set_ylabel(f"{history.metric}" + (f" ({history.unit})" if history.unit else ""))
    figure.legend(loc="outside lower center", ncols=3, frameon=False, fontsize="small")
    return figure


def _panels(history: History) -> Any:
    """Small multiples: a panel per case, in rows of :data:`COLUMNS`, oldest commit left."""
    labels = _by_change(history)
    rows = -(-len(labels) // COLUMNS)
    figure = new_figure(COLUMNS * 3.4, rows * 2.1 + 0.6)
    axes = list(figure.subplots(rows, COLUMNS, squeeze=False).flat)
    last = len(history.commits) - 1
    for index, (ax, label) in enumerate(zip(axes, labels, strict=False)):
        _draw(ax, history, label, history.series[label], policy_colour("", 0), size=40)
        ax.set_title(label, fontsize="small", loc="left")
        bottom = index + COLUMNS >= len(labels)  # the lowest panel of its column
        ticks = sorted({0, last})
        ax.set_xticks(ticks, [history.commits[t] for t in ticks] if bottom else [])
        ax.tick_params(labelsize="x-small")
    for ax in axes[len(labels) :]:
        ax.set_visible(False)
    unit = f" ({history.unit})" if history.unit else ""
    figure.suptitle(f"{history.metric}{unit}, commits oldest first", fontsize="small")
    return figure


def _draw(
    ax: Any,
    history: History,
    label: str,
    values: Sequence[float | None],
    colour: str,
    size: int = 180,
) -> None:
    moved = set(history.moved)
    points = [(x, v) for x, v in enumerate(values) if v is not None]
    ax.plot([x for x, _ in points], [v for _, v in points], marker="o", color=colour)
    rings = [(x, v) for x, v in points if (label, x) in moved]
    ax.scatter(
        [x for x, _ in rings],
        [v for _, v in rings],
        s=size,
        facecolors="none",
        edgecolors=IDLE_COLOUR,
        linewidths=2,
        zorder=3,
    )
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", color="#eeeeee")
    ax.set_axisbelow(True)


def _by_change(history: History) -> list[str]:
    """The cases, those with a marked move first, then by how far the figure went from its
    first value to its last, relative to the first."""
    marked = {label for label, _ in history.moved}

    def change(label: str) -> float:
        present = [v for v in history.series[label] if v is not None]
        if len(present) < 2:
            return 0.0
        first, final = present[0], present[-1]
        return abs(final - first) / max(abs(first), 1e-9)

    return sorted(history.series, key=lambda label: (label not in marked, -change(label)))


def history_blocks(
    histories: Sequence[History],
    plots: Sequence[Plot],
    source: str,
    thresholds: Sequence[Threshold],
) -> list[Block]:
    rule = (
        "beyond " + ", ".join(f"`{t.text}`" for t in thresholds)
        if thresholds
        else "by any amount (give `--fail-on` to mark only moves beyond a threshold)"
    )
    blocks: list[Block] = [
        Heading("kvsched history", 1),
        Bullets(
            (
                f"source: `{source}`",
                f"commits, oldest first: {', '.join(f'`{c}`' for c in histories[0].commits)}"
                " (a `+` marks a checkout with uncommitted changes)",
                f"a commit is marked where a figure moved from the commit before {rule}",
            )
        ),
    ]
    for history, plot in zip(histories, plots, strict=True):
        blocks += [Heading(f"`{history.metric}` over commits"), Image(plot)]
        blocks.append(Paragraph(_moves_sentence(history)))
        blocks.append(_table(history))
    return blocks


def _moves_sentence(history: History) -> str:
    if not history.moved:
        return "No marked move: the figure held from commit to commit."
    by_commit: dict[int, list[str]] = {}
    for label, index in history.moved:
        by_commit.setdefault(index, []).append(label)
    parts = [
        f"`{history.commits[index]}` ({', '.join(labels)})"
        for index, labels in sorted(by_commit.items())
    ]
    return f"Moved at {numbers.counted(len(by_commit), 'commit')}: " + "; ".join(parts) + "."


def _table(history: History) -> Table:
    moved = set(history.moved)
    rows = []
    for label, values in history.series.items():
        present = [v for v in values if v is not None]
        shown = iter(numbers.values(present, history.unit))
        cells = []
        for index, value in enumerate(values):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                cells.append("-")
                continue
            text = next(shown)
            cells.append(f"**{text}**" if (label, index) in moved else text)
        rows.append((label, *cells))
    return Table(("case", *history.commits), tuple(rows))


def write_history(
    histories: Sequence[History], folder: Path, source: str, thresholds: Sequence[Threshold] = ()
) -> Path:
    """Write history.md, history.html and the plots; returns the HTML's path."""
    folder.mkdir(parents=True, exist_ok=True)
    plots = [plot_history(history, folder) for history in histories]
    blocks = history_blocks(histories, plots, source, thresholds)
    write_file(folder / "history.md", to_markdown(blocks))
    path = folder / "history.html"
    write_file(path, to_html(blocks, f"kvsched history: {source}"))
    return path
