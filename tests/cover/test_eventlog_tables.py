"""A page table changes only by the operations that explain it (issue: the version-1 page swap).

Every entry point lowers what it reads to one ordered schedule
(:func:`kvsched.spec.events.fixed_order`): a version-1 line and an in-process run alike. A table
that changed without an allocation or a free is then a finding, and a version-1 line whose
``allocated`` or ``shared`` disagrees with its own tables is an invalid log, never a pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.eventlog.jsonl import EventLogError, log_lines
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.monitor import monitor_run
from kvsched.reference import ContinuousScheduler, run
from kvsched.spec.events import fixed_order
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Limits, Request, Workload

W = Workload(
    "tables",
    Limits(batch_limit=2, page_size=2, pool_pages=12),
    (Request("a", 0, 5, 4), Request("b", 0, 3, 4)),
)


def v1_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_lines(run(W, ContinuousScheduler))]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def both_paths(path: Path) -> list[tuple[str, int] | str]:
    """The first finding (id, iteration), or the error, of the full and the fast path."""
    seen: list[tuple[str, int] | str] = []
    for fast in (False, True):
        try:
            finding = check_stream(path, fast=fast).finding
        except EventLogError as error:
            seen.append(f"invalid: {error}")
            continue
        seen.append("pass" if finding is None else (finding.invariant, finding.iteration))
    return seen


def steady_line(lines: list[dict[str, Any]]) -> int:
    """A line after the first where both requests hold pages and neither gains one."""
    for index, line in enumerate(lines[2:], start=2):
        tables = line.get("page_tables", {})
        two = len(tables) == 2 and all(len(t) >= 2 for t in tables.values())
        if two and not line["allocated"]:
            return index
    raise AssertionError("no steady line with two tables of two pages")


def test_a_clean_version_1_log_passes(tmp_path: Path) -> None:
    assert both_paths(write(tmp_path / "clean.jsonl", v1_lines())) == ["pass", "pass"]


def test_a_table_that_swaps_in_a_page_another_request_holds_is_caught(tmp_path: Path) -> None:
    lines = v1_lines()
    index = steady_line(lines)
    tables = lines[index]["page_tables"]
    tables["a"][0] = tables["b"][-1]  # a middle page swapped for b's; allocated untouched
    seen = both_paths(write(tmp_path / "swap.jsonl", lines))
    assert seen[0] == seen[1] and seen[0] == ("PAGE-3", lines[index]["iteration"]), seen


def test_a_table_reordered_without_a_free_is_caught(tmp_path: Path) -> None:
    lines = v1_lines()
    index = steady_line(lines)
    lines[index]["page_tables"]["a"].reverse()
    assert both_paths(write(tmp_path / "order.jsonl", lines))[0] == (
        "PAGE-3",
        lines[index]["iteration"],
    )


@pytest.mark.parametrize("claim", ["unlisted", "phantom"])
def test_allocated_must_be_what_the_table_gained(claim: str, tmp_path: Path) -> None:
    lines = v1_lines()
    index = steady_line(lines)
    line = lines[index]
    if claim == "unlisted":  # the table gains a free page that 'allocated' does not name
        used = {p for t in line["page_tables"].values() for p in t}
        line["page_tables"]["a"].append(min(set(range(12)) - used))
    else:  # 'allocated' names a page the table never gained
        line["allocated"] = {"a": [line["page_tables"]["a"][-1]]}
    seen = both_paths(write(tmp_path / f"{claim}.jsonl", lines))
    for outcome in seen:
        assert isinstance(outcome, str) and "field 'allocated'" in outcome, seen
        assert f"line {index + 1}:" in outcome, outcome


class SwapsAPage(ContinuousScheduler):
    """Hands request a a page b holds, in place of one of its own, without a free."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        tables = {rid: tuple(t) for rid, t in batch.page_tables.items()}
        a, b = tables.get("a", ()), tables.get("b", ())
        if len(a) >= 2 and b:
            tables["a"] = (b[0], *a[1:])
            return ScheduledBatch(**{**batch.__dict__, "page_tables": tables})
        return batch


def test_an_in_process_swap_is_caught() -> None:
    finding = monitor_run(run(W, SwapsAPage))  # both join at once: a takes b's page (PAGE-2)
    assert finding is not None and finding.invariant in ("PAGE-2", "PAGE-3"), finding


def test_fixed_order_keeps_a_tables_common_beginning() -> None:
    ops, gained = fixed_order({"a": (1, 2, 3)}, (), {}, (), {"a": (1, 9, 3, 4)}, {})
    assert [(op.kind, op.pages) for op in ops] == [("lose", (2, 3)), ("alloc", (9, 3, 4))]
    assert gained == {"a": (9, 3, 4)}
    ops, gained = fixed_order({"a": (1, 2)}, (), {}, (), {"a": (1, 2, 5, 6)}, {"a": (5,)})
    assert [(op.kind, op.pages) for op in ops] == [("share", (5,)), ("alloc", (6,))]
