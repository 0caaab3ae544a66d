"""Checking on after a violation (``--all-findings``): the checks whose counts the rest of an
iteration reads finish their bookkeeping before they report, so what follows a finding in the
same iteration does not blame requests that did nothing wrong."""

from __future__ import annotations

from pathlib import Path

from test_eventlog_v2 import header, iteration, write

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload


def test_a_token_without_compute_is_blamed_on_its_request_alone(tmp_path: Path) -> None:
    # b's whole prompt is a cache hit, yet it produces a token (DEC-3, nano-vllm's hit on the
    # last full block). Checking on, a and c, which computed theirs, are not blamed: the
    # iteration's tokens are counted before the finding is reported.
    workload = Workload(
        "full-hit",
        Limits(4, 16, 8),
        (
            Request("a", 0, 16, 2, prefix_group="g", prefix_tokens=16),
            Request("b", 0, 16, 2, prefix_group="g", prefix_tokens=16),
            Request("c", 0, 8, 2),
        ),
    )
    target = TargetProperties(
        policy="continuous", admission="lazy", token_budget=64, preemption=True,
        prefix_sharing=True, chunking="none",
    )  # fmt: skip
    first = [
        ["admit", "a"], ["alloc", "a", [0]], ["admit", "b"], ["share", "b", [0]],
        ["admit", "c"], ["alloc", "c", [1]], ["cache", "b", 16], ["compute", "a", 16],
        ["compute", "c", 8], ["token", "a"], ["token", "b"], ["token", "c"],
    ]  # fmt: skip
    second = [
        ["alloc", "a", [2]], ["alloc", "b", [3]], ["decode", ["a", "b", "c"]],
        ["finish", "a"], ["finish", "b"], ["finish", "c"],
        ["free", "a", [0, 2]], ["free", "b", [0, 3]], ["free", "c", [1]],
    ]  # fmt: skip
    log = write(
        tmp_path / "l.jsonl",
        header(workload, target),
        iteration(1, first, 6),
        iteration(2, second, 8),
    )
    every = check_stream(log, all_findings=True)
    assert every.finding is not None
    assert (every.finding.invariant, every.finding.requests) == ("DEC-3", ("b",))
    assert every.later == ()


def test_a_schedule_checked_on_past_its_violation_is_applied_whole(tmp_path: Path) -> None:
    # b is admitted over a batch limit of one (BATCH-1), then gets its page, computes and
    # frees it. Checking on, the rest of the schedule is applied: no PAGE-1 for b's KV and no
    # PAGE-3 for its free, as if it never had the page.
    workload = Workload("over", Limits(1, 16, 8), (Request("a", 0, 1, 3), Request("b", 0, 1, 1)))
    target = TargetProperties(policy="continuous", admission="lazy", token_budget=16)
    log = write(
        tmp_path / "l.jsonl",
        header(workload, target),
        iteration(1, [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 1], ["token", "a"]],
                  7, waiting=["b"]),
        iteration(2, [["admit", "b"], ["alloc", "b", [1]], ["compute", "b", 1], ["token", "b"],
                      ["finish", "b"], ["free", "b", [1]]], 7),
        iteration(3, [["decode", ["a"]]], 7),
        iteration(4, [["decode", ["a"]], ["finish", "a"], ["free", "a", [0]]], 8),
    )  # fmt: skip
    every = check_stream(log, all_findings=True)
    assert every.finding is not None
    assert (every.finding.invariant, every.finding.iteration) == ("BATCH-1", 2)
    assert every.later == ()
