"""The timeline of a large workload: how many wait, run and idle over time, and a zoom on a few.

Past a few hundred requests a row per request falls under a pixel. Per policy this draws the
requests waiting per iteration, the decode slots in use with those left idle while a request
waited (red), and a zoom window of consecutive requests drawn one row each as
:mod:`.gantt` draws them, its time window shaded in the panels above. Each policy keeps its own
time axis. Very long runs are averaged into bins so the PNG stays small; the caption says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import numbers
from .collect import CaseRun
from .figures import (
    IDLE_COLOUR,
    WAITING_COLOUR,
    Plot,
    new_figure,
    policy_colour,
    report_style,
    save_png,
    slug,
)
from .gantt import draw_spans
from .observations import active_and_waiting, idle_slot_words, idle_slots

CROWD_FROM = 300
"""Workloads of more requests than this get the crowd timeline instead of a row per request."""
MAX_BINS = 3000
"""Longer runs are averaged into at most this many bins of whole iterations."""
ZOOM_COLOUR = "#cfe2f3"


@dataclass(frozen=True)
class Zoom:
    """Which requests the zoom window draws one by one: ``size`` from index ``first``."""

    first: int | None
    """Index in the workload's declared order; None for the middle of the workload."""
    size: int = 40


DEFAULT_ZOOM = Zoom(None)


def plot_crowd(cases: Sequence[CaseRun], folder: Path, zoom: Zoom | None) -> Plot:
    workload = cases[0].workload
    n = len(workload.requests)
    window = _window(n, zoom)
    rows = 3 if window else 2
    with report_style():
        figure = new_figure(6.4 * len(cases), 8.6 if window else 5.4)
        axes = figure.subplots(
            rows,
            len(cases),
            squeeze=False,
            sharey="row",
            height_ratios=[1, 1, 2.2][:rows],
        )
        bins = 1
        for column, case in enumerate(cases):
            colour = policy_colour(case.policy, column)
            waiting_ax, slots_ax = axes[0][column], axes[1][column]
            slots_ax.sharex(waiting_ax)
            bins = max(bins, _draw_counts(waiting_ax, slots_ax, case, colour))
            m = case.metrics
            waiting_ax.set_title(
                f"{case.policy}: {numbers.count(m.iterations)} iterations, utilization "
                f"{numbers.percent(m.utilization)}, P95 wait {numbers.value(m.p95_wait)}"
            )
            slots_ax.set_xlabel("time (iteration)")
            if window:
                _draw_zoom(axes[2][column], waiting_ax, slots_ax, case, window, colour)
        axes[0][0].set_ylabel("requests waiting")
        axes[1][0].set_ylabel("decode slots")
        if window:
            axes[2][0].set_ylabel("request (zoom)")
        _legend(figure, cases, bool(window))
        filename = f"crowd-{slug(workload.name)}.png"
        png = save_png(figure, folder / filename)
    return Plot(filename, f"Timeline: {workload.name}", _caption(cases, window, bins), png)


def _window(n: int, zoom: Zoom | None) -> range:
    if zoom is None or zoom.size <= 0:
        return range(0)
    size = min(zoom.size, n)
    first = (n - size) // 2 if zoom.first is None else min(max(zoom.first, 0), n - size)
    return range(first, first + size)


def _draw_counts(waiting_ax: Any, slots_ax: Any, case: CaseRun, colour: str) -> int:
    """Draw queue and slots; returns the bin width used (1: every iteration)."""
    active, waiting = active_and_waiting(case)
    limit = case.workload.limits.batch_limit
    busy = np.asarray(active, dtype=float)
    queued = np.asarray(waiting, dtype=float)
    idle = np.asarray(idle_slots(case), dtype=float)
    width = max(1, -(-len(busy) // MAX_BINS))
    if width > 1:
        busy, queued, idle = (_binned(series, width) for series in (busy, queued, idle))
    edges = np.arange(len(busy) + 1) * width
    waiting_ax.stairs(queued, edges, fill=True, color=WAITING_COLOUR)
    slots_ax.stairs(busy, edges, fill=True, color=colour)
    slots_ax.stairs(busy + idle, edges, baseline=busy, fill=True, color=IDLE_COLOUR)
    slots_ax.set_ylim(0, limit * 1.05)
    slots_ax.axhline(limit, color="#444444", linestyle="--", linewidth=0.8)
    end = max(case.metrics.iterations, 1)
    waiting_ax.set_xlim(0, end * 1.01)
    for ax in (waiting_ax, slots_ax):
        ax.grid(axis="y", color="#eeeeee")
        ax.set_axisbelow(True)
    return width


def _binned(series: Any, width: int) -> Any:
    padded = np.pad(series, (0, -len(series) % width))
    return padded.reshape(-1, width).mean(axis=1)


def _draw_zoom(
    ax: Any, waiting_ax: Any, slots_ax: Any, case: CaseRun, window: range, colour: str
) -> None:
    spans = case.spans[window.start : window.stop]
    draw_spans(ax, spans, colour, True, 1, {})
    start = min(span.arrival for span in spans)
    ends = [span.finished for span in spans if span.finished is not None]
    end = max(ends) if len(ends) == len(spans) else case.metrics.iterations
    margin = max(2.0, 0.04 * (end - start))
    ax.set_xlim(start - margin, end + 4 * margin)
    ax.set_xlabel("time (iteration), zoom window")
    ax.set_title(
        f"requests {spans[0].id} to {spans[-1].id} "
        f"(#{numbers.count(window.start + 1)} to #{numbers.count(window.stop)})",
        fontsize=10,
    )
    for upper in (waiting_ax, slots_ax):
        upper.axvspan(start, end, color=ZOOM_COLOUR, alpha=0.6, zorder=0, linewidth=0)
    if len(spans) > 20:
        ax.tick_params(axis="y", labelsize=7)


def _legend(figure: Any, cases: Sequence[CaseRun], zoom: bool) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=WAITING_COLOUR, label="waiting")]
    handles += [
        Patch(color=policy_colour(c.policy, i), label=f"in the batch ({c.policy})")
        for i, c in enumerate(cases)
    ]
    handles.append(Patch(color=IDLE_COLOUR, label="slot idle while a fitting request waits"))
    if zoom:
        handles.append(Patch(color=ZOOM_COLOUR, label="zoom window"))
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)


def _caption(cases: Sequence[CaseRun], window: range, bins: int) -> str:
    workload = cases[0].workload
    words = (
        f"{numbers.counted(len(workload.requests), 'request')}, too many for a row each. Top: "
        "requests waiting (arrived, not admitted) in each iteration. Middle: decode slots in use "
        f"(batch limit {numbers.count(workload.limits.batch_limit)}, dashed) and, in red, slots "
        "left idle while a fitting request waited: "
        + "; ".join(idle_slot_words(case) for case in cases)
        + "."
    )
    if window:
        middle = window.start == (len(workload.requests) - len(window)) // 2
        words += (
            f" Bottom: a zoom on {numbers.counted(len(window), 'request')} in declared order "
            f"(#{numbers.count(window.start + 1)} to #{numbers.count(window.stop)}"
            f"{', the middle of the workload' if middle else ''}"
            "; `--zoom FIRST:COUNT` picks others), one row each: grey while it waits, coloured "
            "while it is in the batch, with the iterations of its admission and last token; "
            "its time window is shaded above."
        )
    if len({case.metrics.iterations for case in cases}) > 1:
        words += " Each policy has its own time axis."
    if bins > 1:
        words += f" Figures are averaged over bins of {numbers.counted(bins, 'iteration')}."
    return words
