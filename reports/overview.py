"""For a report over several workloads: a contents list and one table of every case at a glance.

The overview carries the figures a reader compares across workloads (iterations, utilization
beside pool occupancy, P95 wait) and flags what :mod:`.observations` found, so a workload whose
memory binds or whose queue grows stands out before its section is opened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kvsched.spec.workload import Workload

from . import numbers
from .collect import CaseRun
from .observations import backlog, memory_binds, occupancy
from .render import Block, Bullets, Heading, Table


def anchor(workload: str) -> str:
    """The id of a workload's section, as GitHub would make it from ``Workload `NAME```."""
    return "workload-" + re.sub(r"[^a-z0-9_-]", "", workload.lower().replace(" ", "-"))


def contents_and_overview(
    groups: Sequence[tuple[Workload, Sequence[CaseRun]]], comparison: bool
) -> list[Block]:
    links = ["[Overview](#overview)"]
    if comparison:
        links.append("[Baseline against candidate](#comparison)")
    links += [f"[Workload `{w.name}`](#{anchor(w.name)})" for w, _ in groups]
    return [
        Heading("Contents", 2),
        Bullets(tuple(links)),
        Heading("Overview", 2, anchor="overview"),
        _overview_table(groups),
    ]


def _overview_table(groups: Sequence[tuple[Workload, Sequence[CaseRun]]]) -> Table:
    rows = []
    for workload, cases in groups:
        waits = numbers.values([case.metrics.p95_wait for case in cases])
        for case, wait in zip(cases, waits, strict=True):
            notes = [
                note
                for note, found in (
                    ("did not complete", bool(case.problem)),
                    ("memory binds", bool(memory_binds(case))),
                    ("waits grow", bool(backlog(case))),
                )
                if found
            ]
            rows.append(
                (
                    f"[`{workload.name}`](#{anchor(workload.name)})",
                    numbers.count(len(workload.requests)),
                    case.policy,
                    numbers.count(case.metrics.iterations),
                    numbers.percent(case.metrics.utilization),
                    numbers.percent(occupancy(case).peak),
                    wait,
                    ", ".join(notes),
                )
            )
    headers = (
        "workload",
        "requests",
        "policy",
        "iterations",
        "utilization",
        "pool peak",
        "P95 wait",
        "notes",
    )
    return Table(headers, tuple(rows))
