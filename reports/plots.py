"""KV pages in use and wasted slots over iterations, and the wait-time distribution per policy.

The membership timeline has its own module (:mod:`.gantt`). All three are drawn from a run's
events (:mod:`.series`), never from the summary figures alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import numbers
from .collect import CaseRun
from .figures import Plot, new_figure, policy_colour, report_style, save_png, slug
from .observations import occupancy

PER_REQUEST_BARS = 40
"""Up to this many requests the wait plot also shows each request's wait as a bar."""
LOG_WAITS_FROM = 200
"""Beyond this longest wait the distribution's x axis may be logarithmic (linear up to 10)..."""
LOG_SPREAD = 10
"""...when one policy's median wait is this many times another's; otherwise the short waits
would squeeze every curve into the right half of the plot."""


def plot_pages(cases: Sequence[CaseRun], folder: Path) -> Plot:
    """Pages in use (7.5) and wasted slots (7.6) per iteration, one line per policy."""
    workload = cases[0].workload
    limits = workload.limits
    with report_style():
        figure = new_figure(11, 6.4)
        pages_ax, wasted_ax = figure.subplots(2, 1, sharex=True)
        for order, case in enumerate(cases):
            series = case.series
            if series is None:
                continue
            edges = list(range(len(series.pages_in_use) + 1))
            colour = policy_colour(case.policy, order)
            seen = occupancy(case)
            mean = "" if seen.mean is None else f", mean {numbers.percent(seen.mean)}"
            pages_ax.stairs(
                series.pages_in_use,
                edges,
                color=colour,
                linewidth=1.8,
                label=f"{case.policy} (peak {numbers.count(case.metrics.peak_pages)}, "
                f"{numbers.percent(seen.peak)} of the pool{mean})",
            )
            wasted_ax.stairs(
                series.wasted_slots,
                edges,
                color=colour,
                linewidth=1.8,
                label=f"{case.policy} (peak {numbers.count(case.metrics.peak_wasted_slots)}, "
                f"mean {numbers.fixed(case.metrics.mean_wasted_slots)})",
            )
            if len(cases) > 1:
                for ax in (pages_ax, wasted_ax):
                    ax.axvline(len(series.pages_in_use), color=colour, linestyle=":", linewidth=1)
        pages_ax.axhline(limits.pool_pages, color="#444444", linestyle="--", linewidth=1)
        # Above their lines no curve can reach (pages never exceed the pool, waste never exceeds
        # PAGE-1's bound), and on the left no policy's end marker does.
        pages_ax.annotate(
            f"pool: {numbers.counted(limits.pool_pages, 'page')}",
            (0, limits.pool_pages),
            xycoords=("axes fraction", "data"),
            xytext=(4, 3),
            textcoords="offset points",
            ha="left",
            color="#444444",
        )
        pages_ax.set_ylim(0, limits.pool_pages * 1.08)
        pages_ax.set_ylabel("KV pages in use")
        bound = limits.batch_limit * (limits.page_size - 1)
        wasted_ax.axhline(bound, color="#444444", linestyle=":", linewidth=1)
        wasted_ax.annotate(
            f"at most {numbers.count(limits.batch_limit)} x {limits.page_size - 1} = "
            f"{numbers.count(bound)} (PAGE-1)",
            (0, bound),
            xycoords=("axes fraction", "data"),
            xytext=(4, 3),
            textcoords="offset points",
            ha="left",
            color="#444444",
        )
        wasted_ax.set_ylim(0, limits.batch_limit * limits.page_size * 1.08)
        wasted_ax.set_ylabel("wasted token slots")
        wasted_ax.set_xlabel("time (iteration n runs from n-1 to n)")
        for ax in (pages_ax, wasted_ax):
            _legend_above(ax, len(cases))
            ax.grid(axis="y", color="#eeeeee")
            ax.set_axisbelow(True)
            ax.set_xlim(0, None)
        filename = f"pages-{slug(workload.name)}.png"
        png = save_png(figure, folder / filename)
    caption = (
        f"Top: distinct KV pages held by the batch in each iteration (pool of "
        f"{numbers.counted(limits.pool_pages, 'page')} of {limits.page_size} token slots); the "
        "legend gives each policy's peak and mean occupancy of the pool. Bottom: slots allocated "
        f"but not yet filled; each request wastes fewer than {limits.page_size} (PAGE-1), so the "
        "batch never exceeds the dotted line."
    )
    if len(cases) > 1:
        caption += (
            " The policies share this time axis; a dotted vertical line marks the last "
            "iteration of each."
        )
    return Plot(filename, f"KV pages and wasted slots: {workload.name}", caption, png)


def plot_waits(cases: Sequence[CaseRun], folder: Path) -> Plot:
    """Per-request waits (small workloads) and the cumulative distribution with P95 marked."""
    workload = cases[0].workload
    ids = [r.id for r in workload.requests]
    per_request = len(ids) <= PER_REQUEST_BARS
    with report_style():
        figure = new_figure(12 if per_request else 8, 5.2)
        if per_request:
            bars_ax, cdf_ax = figure.subplots(1, 2, width_ratios=[1, 1.3])
            _wait_bars(bars_ax, cases, ids)
        else:
            cdf_ax = figure.subplots(1, 1)
        _wait_cdf(cdf_ax, cases)
        figure.legend(
            *cdf_ax.get_legend_handles_labels(),
            loc="outside lower center",
            ncols=len(cases),
            frameon=False,
        )
        filename = f"waits-{slug(workload.name)}.png"
        png = save_png(figure, folder / filename)
    method = cases[0].metrics.percentile_method
    caption = (
        "Wait = iterations from a request's arrival to the start of its first iteration "
        "(section 7.3). "
        + ("Left: each request's wait under each policy. Right: " if per_request else "")
        + "the share of requests that waited at most x iterations; the dashed lines mark each "
        f"policy's P95 wait, its value in the legend (numpy's `{method}` method, section 7.4)."
    )
    return Plot(filename, f"Wait-time distribution: {workload.name}", caption, png)


def _wait_bars(ax: Any, cases: Sequence[CaseRun], ids: Sequence[str]) -> None:
    height = 0.8 / len(cases)
    for order, case in enumerate(cases):
        rows = [index + (order - (len(cases) - 1) / 2) * height for index in range(len(ids))]
        waits = [case.metrics.waits.get(request_id, 0) for request_id in ids]
        ax.barh(
            rows, waits, height=height, color=policy_colour(case.policy, order), label=case.policy
        )
        for row, wait in zip(rows, waits, strict=True):
            ax.text(wait + 0.3, row, str(wait), va="center", fontsize=8)
    ax.set_yticks(range(len(ids)), ids)
    ax.set_ylim(len(ids) - 0.5, -0.5)
    ax.set_xlabel("wait (iterations)")
    ax.set_ylabel("request")
    ax.set_title("wait per request")
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)


def _wait_cdf(ax: Any, cases: Sequence[CaseRun]) -> None:
    longest = max((max(c.metrics.waits.values(), default=0) for c in cases), default=0)
    for order, case in enumerate(cases):
        colour = policy_colour(case.policy, order)
        waits = sorted(case.metrics.waits.values())
        if not waits:
            continue
        shares = [(index + 1) / len(waits) for index in range(len(waits))]
        # The curve stays at 1 past a policy's longest wait: extend it to the common x range.
        ax.step(
            [0, *waits, longest],
            [0.0, *shares, 1.0],
            where="post",
            color=colour,
            linewidth=1.8,
            label=f"{case.policy} (P95 wait {numbers.value(case.metrics.p95_wait)})",
        )
        # The P95 value goes in the legend, where no curve can run through it.
        ax.axvline(case.metrics.p95_wait, color=colour, linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.05)
    ax.set_xlim(0, None)
    ax.set_xlabel("wait (iterations)")
    medians = [float(np.median(list(c.metrics.waits.values()))) for c in cases if c.metrics.waits]
    if longest > LOG_WAITS_FROM and max(medians) > LOG_SPREAD * max(min(medians), 1.0):
        # Waits spanning orders of magnitude: a linear axis would flatten the shorter policy.
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("wait (iterations, log scale above 10)")
    ax.set_ylabel("share of requests waiting at most x")
    ax.set_title("wait distribution")
    ax.grid(color="#eeeeee")
    ax.set_axisbelow(True)


def _legend_above(ax: Any, entries: int) -> None:
    """Legend in a row above the axes, where it cannot hide a line."""
    ax.legend(
        loc="lower left", bbox_to_anchor=(0, 1.0), ncols=entries, frameon=False, borderaxespad=0.2
    )
