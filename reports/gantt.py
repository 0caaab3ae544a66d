"""The membership timeline: one row per request, waiting and active spans, one column per policy.

Under each timeline a strip shows the decode slots per iteration: slots in use, and slots idle
while a request waits (red), which the caption explains for this run (:mod:`.observations`).
Each policy keeps its own time axis, so one that ends sooner still fills its panel. Past a few
hundred requests rows fall under a pixel; :mod:`.crowd` draws those workloads instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
from .handover import Handover, first_handover
from .observations import idle_slot_words
from .series import RequestSpan

LABELLED_ROWS = 40
"""Up to this many requests each row is a labelled bar; beyond it rows are thin lines."""
MAX_ROWS = 2000
"""Beyond this many requests every k-th is drawn, so the figure stays legible and small."""


def plot_membership(cases: Sequence[CaseRun], folder: Path) -> Plot:
    """Side-by-side timelines of one workload's cases (one per policy) as one PNG."""
    workload = cases[0].workload
    every = -(-len(workload.requests) // MAX_ROWS)
    rows = len(workload.requests[::every])
    labelled = rows <= LABELLED_ROWS
    strip = all(case.series is not None for case in cases)  # the fast path keeps no series
    height = min(2.2 + 0.42 * rows, 9.0) + (1.6 if strip else 0.6)
    with report_style():
        figure = new_figure(6.2 * len(cases), height)
        axes = figure.subplots(
            2 if strip else 1,
            len(cases),
            squeeze=False,
            sharex="col",
            sharey="row",
            height_ratios=[4, 1] if strip else None,
        )
        handover = _handover(cases) if labelled else None
        for column, case in enumerate(cases):
            colour = policy_colour(case.policy, column)
            spans = case.spans[::every]
            # Under static batching the early finisher's label goes after its idle slot.
            label_at = (
                {handover.early: handover.drained_static}
                if handover is not None and case.policy == "static"
                else {}
            )
            draw_spans(axes[0][column], spans, colour, labelled, every, label_at)
            if handover is not None:
                _mark_handover(axes[0][column], spans, case.policy, handover)
            if strip:
                _draw_slots(axes[1][column], case, colour)
            axes[0][column].set_title(
                f"{case.policy}: {numbers.count(case.metrics.iterations)} iterations, "
                f"utilization {numbers.percent(case.metrics.utilization)}, "
                f"P95 wait {numbers.value(case.metrics.p95_wait)}"
            )
            axes[-1][column].set_xlabel("time (iteration n runs from n-1 to n)")
            end = max(case.metrics.iterations, 1)
            axes[0][column].set_xlim(0, end * 1.02 + (6 if labelled else 0))
        axes[0][0].set_ylabel("request" if every == 1 else "request (index in the workload)")
        if strip:
            axes[1][0].set_ylabel("decode slots")
        _legend(figure, cases, strip)
        filename = f"membership-{slug(workload.name)}.png"
        png = save_png(figure, folder / filename)
    caption = (
        "One row per request, in the workload's order: grey while it waits (from its arrival to "
        "its admission), coloured while it is in the batch"
        + (
            "; the numbers are the iterations of its admission and of its last token."
            if labelled
            else "."
        )
    )
    if strip:
        caption += (
            " Below: decode slots in use per iteration, and in red the slots left idle while a "
            "fitting request was waiting: "
            + "; ".join(idle_slot_words(case) for case in cases)
            + "."
        )
    if len({case.metrics.iterations for case in cases}) > 1:
        caption += " Each policy has its own time axis."
    if every > 1:
        caption += f" One request in {every} is drawn ({rows} of {len(workload.requests)})."
    return Plot(filename, f"Membership timeline: {workload.name}", caption, png)


def draw_spans(
    ax: Any,
    spans: Sequence[RequestSpan],
    colour: str,
    labelled: bool,
    every: int,
    label_at: Mapping[str, int],
) -> None:
    """One row per span at y = its index in the workload (spans are every ``every``-th)."""
    end_of_run = max((s.finished or 0) for s in spans) if spans else 0
    ys = [row * every for row in range(len(spans))]
    waiting = [
        (y, s.arrival, s.wait_end if s.wait_end is not None else end_of_run)
        for y, s in zip(ys, spans, strict=True)
    ]
    active = [
        (y, s.wait_end, s.finished if s.finished is not None else end_of_run)
        for y, s in zip(ys, spans, strict=True)
        if s.wait_end is not None
    ]
    if labelled:
        for bars, bar_colour in ((waiting, WAITING_COLOUR), (active, colour)):
            ax.barh(
                [y for y, _, _ in bars],
                [end - start for _, start, end in bars],
                left=[start for _, start, _ in bars],
                height=0.55,
                color=bar_colour,
            )
        for y, span in zip(ys, spans, strict=True):
            if span.admitted is not None:
                text = f"{span.admitted}-{span.finished}" if span.finished else f"{span.admitted}-"
                x = label_at.get(span.id, span.finished or end_of_run) + 1.5
                ax.text(x, y, text, va="center", fontsize=9 if len(spans) <= 20 else 7)
        ax.set_yticks(ys, [s.id for s in spans])
    else:
        width = max(0.3, min(2.0, 400 / max(len(spans), 1)))
        for bars, bar_colour in ((waiting, WAITING_COLOUR), (active, colour)):
            ax.hlines(
                [y for y, _, _ in bars],
                [start for _, start, _ in bars],
                [end for _, _, end in bars],
                colors=bar_colour,
                linewidth=width,
            )
    ax.set_ylim((len(spans) - 0.5) * every, -0.5 * every)  # first request on top
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)


def _handover(cases: Sequence[CaseRun]) -> Handover | None:
    by_policy = {case.policy: case for case in cases}
    if "static" not in by_policy or "continuous" not in by_policy:
        return None
    return first_handover(by_policy["static"], by_policy["continuous"])


def _mark_handover(ax: Any, spans: Sequence[RequestSpan], policy: str, h: Handover) -> None:
    """Draw the storyboard (:mod:`.handover`): the idle slot, or the request that takes it."""
    rows = {span.id: row for row, span in enumerate(spans)}
    row = rows[h.early]
    note = {"color": IDLE_COLOUR, "fontsize": 9, "va": "center"}
    if policy == "static" and h.drained_static > h.freed_static:
        ax.barh(
            [row],
            [h.drained_static - h.freed_static],
            left=[h.freed_static],
            height=0.55,
            color=IDLE_COLOUR,
        )
        queued = h.waiting_static
        shown = ", ".join(queued) if len(queued) <= 4 else f"{len(queued):,} requests"
        waiting = f" while {shown} wait" if queued else ""
        ax.text(
            h.drained_static + 2,
            row + 0.5,
            f"{h.early}'s slot idle until the batch drains ({h.drained_static}){waiting}",
            **note,
        )
    if policy == "continuous" and h.joined_continuous and h.freed_continuous is not None:
        joiner = h.joined_continuous[0]
        ax.annotate(
            "",
            xy=(h.freed_continuous, rows[joiner] - 0.3),
            xytext=(h.freed_continuous, row + 0.3),
            arrowprops={"arrowstyle": "->", "color": IDLE_COLOUR, "linewidth": 1.5},
        )
        ax.text(
            h.freed_continuous + 2,
            row + 0.5,
            f"{joiner} takes {h.early}'s slot in iteration {h.freed_continuous + 1}",
            **note,
        )


def _draw_slots(ax: Any, case: CaseRun, colour: str) -> None:
    limit = case.workload.limits.batch_limit
    ax.set_ylim(0, limit)
    ax.set_yticks(sorted({0, limit}))
    series = case.series
    if series is None:
        ax.text(
            0.5,
            0.5,
            "not kept by the fast path",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
        )
        return
    idle = series.idle
    edges = list(range(len(series.active) + 1))
    if series.active:
        ax.stairs(series.active, edges, fill=True, color=colour)
        on_top = [a + i for a, i in zip(series.active, idle, strict=True)]
        ax.stairs(on_top, edges, baseline=list(series.active), fill=True, color=IDLE_COLOUR)


def _legend(figure: Any, cases: Sequence[CaseRun], strip: bool) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=WAITING_COLOUR, label="waiting")]
    handles += [
        Patch(color=policy_colour(c.policy, i), label=f"active ({c.policy})")
        for i, c in enumerate(cases)
    ]
    if strip:
        handles.append(Patch(color=IDLE_COLOUR, label="slot idle while a fitting request waits"))
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
