"""The history page: per metric, a plot over commits and the table behind it, moves marked.

Written as ``history.md`` and a self-contained ``history.html`` (:mod:`.render`), with one PNG
per metric beside them. A marked commit is one where the figure moved from the commit before
(:mod:`.history` decides which), ringed in the plot and in bold in the table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from kvsched.checks.verdict.files import write_file

from . import numbers
from .figures import IDLE_COLOUR, Plot, new_figure, policy_colour, report_style, save_png, slug
from .gate import Threshold
from .history import History
from .render import Block, Bullets, Heading, Image, Paragraph, Table, to_html, to_markdown

SIDE_LEGEND_FROM = 6
"""Beyond this many cases the legend moves to a column on the right, each case its own colour."""


def _colour(label: str, order: int, lines: int) -> str:
    if lines <= 2:
        return policy_colour(label.rpartition(" / ")[2], order)
    from matplotlib import colormaps

    red, green, blue, _ = colormaps["tab20"](order % 20)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def plot_history(history: History, folder: Path) -> Plot:
    """Draw one metric over commits, moved commits ringed."""
    name = f"history-{slug(history.metric)}.png"
    moved = set(history.moved)
    lines = len(history.series)
    longest = max((len(label) for label in history.series), default=10)
    with report_style():
        # Many cases: a legend column to the right, one colour each, the figure as tall as it.
        side = lines > SIDE_LEGEND_FROM
        width = max(8.0, 0.5 * len(history.commits) + 4) + (0.075 * longest if side else 0)
        figure = new_figure(width, max(4.2, 0.2 * lines + 1.2) if side else 4.2)
        ax = figure.subplots()
        positions = range(len(history.commits))
        for order, (label, values) in enumerate(history.series.items()):
            colour = _colour(label, order, lines)
            points = [(x, v) for x, v in zip(positions, values, strict=True) if v is not None]
            ax.plot([x for x, _ in points], [v for _, v in points], marker="o", color=colour)
            ax.plot([], [], marker="o", color=colour, label=label)
            rings = [(x, v) for x, v in points if (label, x) in moved]
            ax.scatter(
                [x for x, _ in rings],
                [v for _, v in rings],
                s=180,
                facecolors="none",
                edgecolors=IDLE_COLOUR,
                linewidths=2,
                zorder=3,
            )
        if history.moved:
            ax.scatter([], [], s=180, facecolors="none", edgecolors=IDLE_COLOUR, label="moved")
        ax.set_xticks(list(positions), history.commits, rotation=45, ha="right")
        ax.set_xlabel("commit, oldest first")
        ax.set_ylabel(f"{history.metric}" + (f" ({history.unit})" if history.unit else ""))
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", color="#eeeeee")
        ax.set_axisbelow(True)
        if side:
            figure.legend(loc="outside right upper", ncols=1, frameon=False, fontsize="x-small")
        else:
            figure.legend(loc="outside lower center", ncols=3, frameon=False, fontsize="small")
        png = save_png(figure, folder / name)
    caption = (
        f"`{history.metric}` at each of {numbers.counted(len(history.commits), 'commit')}, "
        "one line per case; a red ring marks a commit where the figure moved from the one before."
    )
    return Plot(name, f"{history.metric} over commits", caption, png)


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
