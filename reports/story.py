"""The lesson's story told from a run: static against continuous batching on one workload.

Every sentence is read off the two runs (:mod:`.handover`): who forms the first batch, who
finishes first, how long that slot idles under static batching (BATCH-2) and who takes it under
continuous batching (BATCH-3). For the teaching trace the lesson's published figures and
storyboard (:mod:`kvsched.spec.teaching`) are set beside ours, rounded as the lesson prints them,
with every disagreement shown rather than hidden.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvsched.spec.teaching import (
    PUBLISHED,
    STORYBOARD_A_FINISHES,
    STORYBOARD_D_JOINS_CONTINUOUS,
    STORYBOARD_FIRST_BATCH,
    STORYBOARD_FIRST_BATCH_PAGES,
)

from . import numbers
from .collect import CaseRun
from .handover import Handover, first_handover
from .render import Block, Paragraph, Table


def policy_story(static: CaseRun, continuous: CaseRun) -> list[Block]:
    """Sentences comparing the two policies on one workload, from the runs alone."""
    s, c = static.metrics, continuous.metrics
    fewer = s.iterations - c.iterations
    share = abs(fewer) / s.iterations if s.iterations else 0.0
    waits = numbers.values((s.p95_wait, c.p95_wait))
    lines = [
        f"Same arrivals, same limits: static batching takes **{numbers.count(s.iterations)}** "
        f"iterations and continuous batching **{numbers.count(c.iterations)}** "
        f"({numbers.count(abs(fewer))} {'fewer' if fewer >= 0 else 'more'}, "
        f"{numbers.percent(share)}). Utilization {numbers.percent(s.utilization)} against "
        f"{numbers.percent(c.utilization)}; P95 wait {waits[0]} against {waits[1]} iterations."
    ]
    handover = first_handover(static, continuous)
    if handover is not None:
        order = [span.id for span in static.spans]
        lines.append(_handover_words(handover, order))
    return [Paragraph(" ".join(lines))]


def _handover_words(h: Handover, order: Sequence[str]) -> str:
    held = f", holding {h.first_pages} KV pages in its first iteration" if h.first_pages else ""
    idles = (
        f"idles until the batch drains in iteration {h.drained_static}"
        if h.drained_static > h.freed_static
        else "frees as the whole batch drains"
    )
    waiting = ""
    if h.waiting_static:
        verb = "waits" if len(h.waiting_static) == 1 else "wait"
        waiting = f", while {names(h.waiting_static, order)} {verb}"
    forms = "forms" if len(h.first_batch) == 1 else "form"
    words = (
        f"Under static batching {names(h.first_batch, order)} {forms} the first batch{held}. "
        f"`{h.early}` finishes in iteration {h.freed_static}; its slot {idles}{waiting} "
        "(BATCH-2)."
    )
    if h.freed_continuous is None:
        return words
    if not h.joined_continuous:
        return words + (
            f" Under continuous batching `{h.early}` finishes in iteration {h.freed_continuous}"
            " and no request joins in the next."
        )
    verb = "takes" if len(h.joined_continuous) == 1 else "take"
    return words + (
        f" Under continuous batching {names(h.joined_continuous, order)} {verb} the freed slot in "
        f"iteration {h.freed_continuous + 1} (BATCH-3)."
    )


def lesson_comparison(static: CaseRun, continuous: CaseRun) -> list[Block]:
    """The lesson's figures and storyboard beside ours, for the teaching trace."""
    rows = []
    for case in (static, continuous):
        published = PUBLISHED[case.policy]
        m = case.metrics
        for figure, ours, rounded, theirs in (
            ("iterations", numbers.count(m.iterations), m.iterations, published.iterations),
            (
                "utilization",
                numbers.percent(m.utilization),
                round(100 * m.utilization),
                published.utilization_percent,
            ),
            ("P95 wait", numbers.value(m.p95_wait), round(m.p95_wait), published.p95_wait),
        ):
            shown = f"{theirs}%" if figure == "utilization" else f"{theirs}"
            rows.append((case.policy, figure, ours, shown, "yes" if rounded == theirs else "no"))
    return [
        Paragraph(
            "The lesson publishes these figures for its trace (`kvsched.spec.teaching.PUBLISHED`)"
            ". The column agrees compares ours rounded to the lesson's precision (whole "
            "iterations, whole percent). P95 waits are taken by numpy's "
            f"`{static.metrics.percentile_method}` method, the convention the workload declares "
            "(spec/semantics.md 7.4)."
        ),
        Table(("policy", "figure", "ours", "lesson", "agrees"), tuple(rows)),
        Paragraph(
            "A disagreement is shown, not rounded away: spec/traces/README.md tells how the "
            "trace was reconstructed and which figures no workload can meet exactly."
        ),
        Paragraph("The lesson's storyboard, step by step, against our runs:"),
        Table(("storyboard step", "lesson", "ours", "agrees"), _storyboard(static, continuous)),
    ]


def _storyboard(static: CaseRun, continuous: CaseRun) -> tuple[tuple[str, ...], ...]:
    h = first_handover(static, continuous)
    a_ends = {s.id: s.finished for s in static.spans}.get(STORYBOARD_FIRST_BATCH[0])
    d_joins = {s.id: s.admitted for s in continuous.spans}.get("d")
    steps = (
        (
            "first batch",
            " · ".join(STORYBOARD_FIRST_BATCH),
            " · ".join(h.first_batch) if h else "none",
        ),
        (
            "KV pages of the first batch",
            str(STORYBOARD_FIRST_BATCH_PAGES),
            str(h.first_pages) if h and h.first_pages is not None else "n/a",
        ),
        ("`a` finishes in iteration", str(STORYBOARD_A_FINISHES), str(a_ends)),
        ("`d` joins (continuous) in iteration", str(STORYBOARD_D_JOINS_CONTINUOUS), str(d_joins)),
    )
    return tuple(
        (step, lesson, ours, "yes" if lesson == ours else "no") for step, lesson, ours in steps
    )


NAMED_UP_TO = 4
"""Up to this many requests a sentence names them all; beyond, it counts them and gives a range."""


def names(ids: Sequence[str], order: Sequence[str] = ()) -> str:
    """`a`, `b` and `c`; or `49 requests, r32 to r80` when there are more than a reader can take
    in (``order``, the workload's declared order, tells whether they run without a gap)."""
    quoted = [f"`{i}`" for i in ids]
    if len(quoted) <= NAMED_UP_TO:
        return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    position = {request_id: index for index, request_id in enumerate(order)}
    places = sorted(position[i] for i in ids if i in position)
    together = len(places) == len(ids) and places[-1] - places[0] == len(places) - 1
    span = "" if together else ", not all in between"
    first, last = (order[places[0]], order[places[-1]]) if places else (ids[0], ids[-1])
    return f"{numbers.counted(len(ids), 'request')} (`{first}` to `{last}`{span})"
