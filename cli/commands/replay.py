"""``kvsched replay``: run both reference policies over a workload and show the lesson's comparison.

The table puts the policies side by side; the timeline then tells, iteration by iteration, who is
active, who waits, who finished and which pages were freed, as the lesson storyboards it. Runs of
iterations in which nothing but decoding happened are folded into one line.

Only the timeline needs every iteration's event. Without it the metrics come from the
event-jumping replay wherever its scope says it is exact (the same figures, bit for bit, in a
fraction of the time); ``--engine stepped`` steps every iteration anyway. The fast path reads
the requests as columns (a family generates them so) and writes the JSON as it goes, so its
memory grows by about 50 bytes a request (docs/measurements.md). ``--design NAME`` adds a column
for the engine scheduler as designed NAME, from its batched replay wherever that is exact
(reference/engine_fastpath.py), else from its stepped loop.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass, replace
from typing import Any

from kvsched.commands.figures import write_json
from kvsched.commands.output import emit
from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.reference.engine import Run
from kvsched.reference.engine_fastpath import engine_metrics
from kvsched.reference.engine_scheduler import CONFIGS
from kvsched.reference.families import columns_from_spec, workload_from_spec
from kvsched.reference.fastpath import replay, replay_columns, replay_scope
from kvsched.reference.fastpath_scope import policy_scope
from kvsched.reference.metrics import RunMetrics
from kvsched.reports import numbers
from kvsched.reports.results import RUN_METRIC_UNITS
from kvsched.reports.text_table import WIDTH, text_table
from kvsched.spec.events import IterationEvent
from kvsched.spec.teaching import TEACHING_TRACE
from kvsched.spec.text import id_list, page_list, plural
from kvsched.spec.vocabulary import PERCENTILE_METHODS
from kvsched.spec.workload import Limits


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="compare static and continuous batching on a workload (default: the teaching trace)",
        description="Run the reference static and continuous schedulers over WORKLOAD and print "
        "their metrics side by side, then the membership timeline.",
    )
    parser.add_argument(
        "workload",
        nargs="?",
        default=str(TEACHING_TRACE),
        help="a workload file (JSON, spec/schemas/workload.schema.json) or family:NAME:SIZE[:SEED] "
        "for a seeded family; default: the teaching trace",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--percentile",
        choices=PERCENTILE_METHODS,
        metavar="METHOD",
        help="numpy.percentile method for P50 and P95 wait (spec/semantics.md 7.4); default: the "
        "workload's percentile_method, else linear. The teaching trace declares lower",
    )
    parser.add_argument(
        "--timeline",
        choices=("changes", "full", "none"),
        default="changes",
        help="changes: fold iterations where only decoding happened (default); full: every "
        "iteration; none: the table only",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "stepped"),
        default="auto",
        help="auto: the event-jumping replay wherever it is exact, the stepped engine for the "
        "timeline (default); stepped: step every iteration (same figures, slower)",
    )
    parser.add_argument(
        "--design",
        action="append",
        choices=sorted(CONFIGS),
        default=[],
        metavar="NAME",
        help="also replay the engine scheduler as designed NAME (one of "
        f"{', '.join(sorted(CONFIGS))}; repeatable), a column of the table beside the "
        "lesson's policies; the timeline shows the lesson's policies only",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    timeline = args.format == "table" and args.timeline != "none"
    fast = not timeline and args.engine == "auto"
    metrics: dict[str, RunMetrics] = {}
    runs: dict[str, Run] = {}
    if fast and not args.design and all(policy_scope(policy).covered for policy in POLICIES):
        # Columns, never a Request object each: memory follows the requests' numbers only.
        columns = columns_from_spec(args.workload)
        if args.percentile:
            columns = replace(columns, percentile_method=args.percentile)
        shape = Shape(columns.name, len(columns), columns.limits)
        metrics = {policy: replay_columns(columns, policy) for policy in POLICIES}
    else:
        workload = workload_from_spec(args.workload)
        if args.percentile:
            workload = replace(workload, percentile_method=args.percentile)
        shape = Shape(workload.name, len(workload.requests), workload.limits)
        for policy, scheduler in POLICIES.items():
            if fast and replay_scope(workload, policy).covered:
                metrics[policy] = replay(workload, policy).metrics
                continue
            runs[policy] = run(workload, scheduler, policy)
            metrics[policy] = compute_metrics(workload, runs[policy].events)
        for name in args.design:
            # The lesson's policies own their names: the engine designed as one is told apart.
            column = f"{name} (engine)" if name in POLICIES else name
            metrics[column] = engine_metrics(workload, CONFIGS[name], batched=fast)[0]
    if args.format == "json":
        write_json(metrics)
        return 0
    shown = [render_table(shape, metrics)]
    if timeline:
        shown += [render_timeline(r, fold=args.timeline == "changes") for r in runs.values()]
    emit("\n\n".join(shown))
    return 0


ROWS = {
    "iterations": "iterations",
    "utilization": "utilization",
    "p50_wait": "P50 wait",
    "p95_wait": "P95 wait",
    "max_wait": "max wait",
    "peak_pages": "peak KV pages",
    "peak_wasted_slots": "peak wasted slots",
    "mean_wasted_slots": "mean wasted slots",
}
"""The table's rows: metrics of :class:`~kvsched.reference.metrics.RunMetrics` and their labels."""


@dataclass(frozen=True)
class Shape:
    """What the table's heading says of the workload."""

    name: str
    requests: int
    limits: Limits


def render_table(shape: Shape, metrics: dict[str, RunMetrics]) -> str:
    limits = shape.limits
    header = (
        f"{shape.name}: {shape.requests} requests, batch limit {limits.batch_limit}, "
        f"pages of {plural(limits.page_size, 'token')}, "
        f"pool of {plural(limits.pool_pages, 'page')}"
    )
    # Each row is one metric across the policies, written as a report writes it (one rule,
    # kvsched.reports.numbers, for every table of figures), sharing its decimals.
    runs = list(metrics.values())
    rows = [
        (label, *numbers.values([getattr(m, name) for m in runs], RUN_METRIC_UNITS[name]))
        for name, label in ROWS.items()
    ]
    table = text_table(rows, ["metric", *metrics], ["left", *("right" for _ in metrics)])
    method = next(iter(metrics.values())).percentile_method
    note = (
        "utilization: tokens / (batch limit x iterations with a request active); waits in "
        f"iterations, percentiles by numpy's '{method}' method (spec/semantics.md section 7)"
    )
    return f"{header}\n\n{table}\n\n{textwrap.fill(note, WIDTH)}"


def render_timeline(policy_run: Run, fold: bool = True) -> str:
    lines = [f"{policy_run.policy} batching, membership per iteration:"]
    events = policy_run.events
    batch_limit = policy_run.workload.limits.batch_limit
    index = 0
    while index < len(events):
        event = events[index]
        if not fold or _eventful(event):
            lines.append(_describe(event, batch_limit))
            index += 1
            continue
        end = index
        while end + 1 < len(events) and not _eventful(events[end + 1]):
            end += 1
        lines.append(_describe_quiet(events[index], events[end], batch_limit))
        index = end + 1
    return "\n".join(lines)


def _eventful(event: IterationEvent) -> bool:
    return bool(event.admitted or event.finished or event.arrived)


def _describe(event: IterationEvent, batch_limit: int) -> str:
    parts = []
    if event.arrived:
        parts.append(f"{id_list(event.arrived)} arrive{'s' if len(event.arrived) == 1 else ''}")
    if event.admitted:
        parts.append(f"{id_list(event.admitted)} join")
    active = id_list(event.active) if event.active else "nobody"
    parts.append(f"{active} decode" if event.active else "idle")
    if event.waiting:
        parts.append(f"{id_list(event.waiting)} wait{'s' if len(event.waiting) == 1 else ''}")
    for request_id in event.finished:
        pages = event.freed.get(request_id, ())
        parts.append(
            f"{request_id} finishes, frees {plural(len(pages), 'page')} {page_list(pages)}"
        )
    idle = batch_limit - len(event.active)
    if event.waiting and idle > 0:
        parts.append(f"{plural(idle, 'slot')} idle")
    if event.active:
        parts.append(f"{plural(event.pages_in_use, 'page')} in use")
    return f"  {event.iteration:>7}  " + "; ".join(parts)


def _describe_quiet(first: IterationEvent, last: IterationEvent, batch_limit: int) -> str:
    span = f"{first.iteration}-{last.iteration}" if last is not first else str(first.iteration)
    text = f"{id_list(first.active)} decode" if first.active else "idle: nothing active or waiting"
    if first.waiting:
        text += f"; {id_list(first.waiting)} wait{'s' if len(first.waiting) == 1 else ''}"
        idle = batch_limit - len(first.active)
        if idle > 0:
            text += f"; {idle} slot{'s' if idle > 1 else ''} idle"
    return f"  {span:>7}  {text}"
