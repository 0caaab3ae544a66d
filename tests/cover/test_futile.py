"""LIVE-4, no preemption for nothing (spec/semantics.md 8.1): a cascade of preemptions whose
pages the iteration never uses is caught in its own iteration; a request that preempts itself
because the victims freed too little for its step is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.mutants.engine import engine_log
from kvsched.checks.mutants.stalls import THREE_DECODES, DefersPreemptedFrees
from kvsched.spec.invariants import BY_ID
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload, workload_to_json

WRITE = engine_log(DefersPreemptedFrees, THREE_DECODES)


def test_live_4_is_a_liveness_rule_of_every_target() -> None:
    assert BY_ID["LIVE-4"].layer == "liveness"
    assert BY_ID["LIVE-4"].applies_to == ("any",)


def test_a_deferred_free_cascade_is_live_4_in_its_first_iteration(tmp_path: Path) -> None:
    finding = check_log(WRITE(tmp_path))
    assert finding is not None
    assert (finding.invariant, finding.iteration) == ("LIVE-4", 4)
    assert finding.requests == ("c", "b", "a")
    # The victims' four pages were free by the log's count before 'a' preempted itself, and
    # 'a' needed one more page: the pool had room for it all along.
    assert "4 pages were free before 'a' was preempted last" in finding.message
    assert "(1 page, 'a')" in finding.message


def test_no_other_rule_catches_the_cascade(tmp_path: Path) -> None:
    # The log is otherwise clean: every page freed is accounted for, the cascade repeats in
    # iteration 7 with progress in between (no thrash, LIVE-3), and the run drains within its
    # bound. Before LIVE-4 the bug passed.
    checked = check_stream(WRITE(tmp_path), all_findings=True)
    assert checked.finding is not None
    assert (checked.finding.invariant, checked.finding.iteration) == ("LIVE-4", 4)
    assert checked.later == ()


def test_the_engine_that_frees_at_once_preempts_one_victim_and_is_clean(tmp_path: Path) -> None:
    log = WRITE(tmp_path, buggy=False)
    assert check_log(log) is None
    fourth = json.loads(log.read_text().splitlines()[4])
    assert fourth["preempted"] == ["c"] and fourth["computed"] == {"a": 1, "b": 1}


# vLLM under priority order: 'r', first in the batch, needs three pages for its next chunk; its
# victim 'c' (the lowest priority) frees one, too few, so 'r' is its own next victim and the
# running loop ends with nothing computed. Correct: before 'r' was preempted two pages were free,
# short of the three its step needed.
W = Workload(
    "priority-self-preemption",
    Limits(batch_limit=3, page_size=2, pool_pages=5),
    (
        Request("r", 0, 8, 1, priority=2),
        Request("b", 0, 4, 2, priority=1),
        Request("c", 0, 2, 2, priority=3),
    ),
)
TARGET = TargetProperties(
    "continuous",
    admission="lazy",
    token_budget=8,
    chunked_prefill=True,
    preemption=True,
    order="none",
)
LINES: list[tuple[list[Any], int, list[str]]] = [
    (
        [
            ["admit", "r"], ["alloc", "r", [0]], ["admit", "b"], ["alloc", "b", [1, 2]],
            ["admit", "c"], ["alloc", "c", [3]],
            ["compute", "r", 2], ["compute", "b", 4], ["compute", "c", 2],
            ["token", "b"], ["token", "c"],
        ],
        1,
        [],
    ),
    ([["preempt", "c"], ["free", "c", [3]], ["preempt", "r"], ["free", "r", [0]]], 3, ["r", "c"]),
    (
        [["alloc", "b", [4]], ["decode", ["b"]], ["finish", "b"], ["free", "b", [1, 2, 4]]],
        5,
        ["r", "c"],
    ),
    (
        [
            ["admit", "r"], ["alloc", "r", [0, 1, 2, 3]], ["compute", "r", 8], ["token", "r"],
            ["finish", "r"], ["free", "r", [0, 1, 2, 3]],
        ],
        5,
        ["c"],
    ),
    (
        [
            ["admit", "c"], ["alloc", "c", [0, 1]], ["compute", "c", 3], ["token", "c"],
            ["finish", "c"], ["free", "c", [0, 1]],
        ],
        5,
        [],
    ),
]  # fmt: skip


Lines = list[tuple[list[Any], int, list[str]]]


def write_log(path: Path, workload: Workload, lines: Lines) -> Path:
    header = {
        "type": "header",
        "format": "kvsched-eventlog",
        "version": 2,
        "workload": workload_to_json(workload),
        "target": properties_to_json(TARGET),
    }
    rows = [header]
    for n, (ops, free, waiting) in enumerate(lines, start=1):
        row: dict[str, Any] = {"type": "iteration", "iteration": n, "ops": ops, "free_pages": free}
        if waiting:
            row["waiting"] = waiting
        rows.append(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_request_that_preempts_itself_for_a_step_too_large_is_clean(tmp_path: Path) -> None:
    assert check_log(write_log(tmp_path / "priority.jsonl", W, LINES)) is None


def test_the_same_cascade_when_the_step_fitted_is_live_4(tmp_path: Path) -> None:
    # With a prompt of 2 tokens 'r' is decoding: its step needs one page more, and two were free
    # once 'c' was gone (one before it), so preempting 'r' too made no progress at all.
    short = Workload(W.name, W.limits, (Request("r", 0, 2, 2, priority=2), *W.requests[1:]))
    first = [op for op in LINES[0][0] if op != ["compute", "r", 2]]
    first[first.index(["compute", "b", 4]) : 0] = [["compute", "r", 2], ["token", "r"]]
    lines = [(first, 1, []), LINES[1]]
    finding = check_log(write_log(tmp_path / "futile.jsonl", short, lines))
    assert finding is not None and (finding.invariant, finding.iteration) == ("LIVE-4", 2)
    assert finding.requests == ("c", "r")
