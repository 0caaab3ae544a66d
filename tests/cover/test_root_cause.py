"""The root cause first: of several violations on one run, the verdict names the earliest
iteration's most specific (a malformed answer, then safety, conformance, liveness), says which
followed it, and a free count that does not add up names the pages and who had them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from itertools import pairwise
from pathlib import Path

import pytest
from test_eventlog_v2 import FIRST, header, iteration, write

from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.monitor.registry import Check
from kvsched.checks.monitor.runtime import Monitor, monitor_run, watch_run
from kvsched.checks.mutants.paging import PageInTwoTables
from kvsched.checks.verdict.machine import render_json, render_junit_xml
from kvsched.checks.verdict.render import render_table
from kvsched.checks.verdict.report import Evidence, Report, build_verdict
from kvsched.reference.engine import run
from kvsched.spec.invariants import BY_ID, CATALOGUE, FINDING_ORDER, precedence
from kvsched.spec.workload import Limits, Request, Workload

W = Workload("long", Limits(2, 2, 6), (Request("a", 0, 2, 4), Request("b", 0, 2, 4)))

# b is admitted ahead of a, which came first (BATCH-4, judged at admission), and a computes its
# prompt with no page to hold it (PAGE-1, judged on the tables, later in the iteration).
OVERTAKEN_AND_UNPAGED = [
    ["admit", "b"], ["alloc", "b", [1]], ["admit", "a"], ["compute", "a", 2],
    ["compute", "b", 2], ["token", "a"], ["token", "b"],
]  # fmt: skip


def test_precedence_is_a_malformed_answer_then_the_layers_in_finding_order() -> None:
    ranks = {i.id: precedence(i.id) for i in CATALOGUE}
    assert {i.id for i in CATALOGUE if i.malformed} == {"PROTO-1"}
    assert ranks["PROTO-1"] < min(r for i, r in ranks.items() if i != "PROTO-1")
    for earlier, later in pairwise(FINDING_ORDER):
        worst = max(ranks[i.id] for i in CATALOGUE if i.layer == earlier and not i.malformed)
        assert worst < min(ranks[i.id] for i in CATALOGUE if i.layer == later)
    assert FINDING_ORDER == ("safety", "conformance", "liveness")


def test_within_an_iteration_safety_is_named_before_a_conformance_rule_checked_earlier(
    tmp_path: Path,
) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, OVERTAKEN_AND_UNPAGED, 5))
    finding = check_log(log)
    assert finding is not None
    assert (finding.invariant, finding.iteration, finding.requests) == ("PAGE-1", 1, ("a",))
    # The fast path and the full path agree, and checking on finds the overtaking too.
    assert check_stream(log, fast=True).finding == check_stream(log, fast=False).finding
    every = check_stream(log, all_findings=True)
    assert every.finding == finding
    assert [f.invariant for f in every.later][:1] == ["BATCH-4"]


def test_what_followed_the_first_finding_rides_along_in_order(tmp_path: Path) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, OVERTAKEN_AND_UNPAGED, 5))
    run, properties = read_run(log)
    finding, _ = watch_run(run, properties)
    assert finding is not None and finding.invariant == "PAGE-1"
    followed = [(f.invariant, f.iteration) for f in finding.followed_by]
    # BATCH-4 in the same iteration, less specific; LIVE-1 once the log stops short.
    assert followed[0] == ("BATCH-4", 1) and followed[-1] == ("LIVE-1", 0), followed
    assert all(f.recent == () and f.followed_by == () for f in finding.followed_by)
    assert finding.recent and finding.recent[-1].iteration == 1


def test_a_page_given_to_a_second_owner_is_held_by_both_when_checking_on() -> None:
    # The shrunk witness of the zoo's "page in two tables": b's first page is a's. Checking on
    # follows the target's tables, so b is not also blamed for KV without a page (PAGE-1) nor
    # for freeing a page it does not hold (PAGE-3), as when the ledger left it out.
    w = Workload("two", Limits(2, 1, 2), (Request("a", 0, 0, 1), Request("b", 0, 0, 1)))
    finding = monitor_run(run(w, PageInTwoTables, policy="continuous"))
    assert finding is not None and (finding.invariant, finding.pages) == ("PAGE-2", (0,))
    assert finding.followed_by == ()


def test_a_clean_run_and_a_lone_finding_have_nothing_following(tmp_path: Path) -> None:
    clean = write(tmp_path / "clean.jsonl", header(W), iteration(1, FIRST, 4))
    run, properties = read_run(clean)
    finding, _ = watch_run(run, properties)  # stops short: LIVE-1 alone, at the end
    assert finding is not None and finding.invariant == "LIVE-1"
    assert finding.followed_by == ()


def test_the_verdict_shows_what_followed_in_every_output(tmp_path: Path) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, OVERTAKEN_AND_UNPAGED, 5))
    run, properties = read_run(log)
    finding, _ = watch_run(run, properties)
    verdict = build_verdict("t", "scheduler", "continuous", Evidence(monitor_runs=1), finding)
    report = Report("t", (verdict,))
    table = render_table(report)
    assert "Followed by BATCH-4 in iteration 1, LIVE-1 at the end of the run" in table
    assert "  BATCH-4 (iteration 1): request 'b' was admitted in iteration 1 ahead of" in table
    shown = json.loads(render_json(report))["verdicts"][0]["finding"]
    assert shown["invariant"] == "PAGE-1"
    assert [f["invariant"] for f in shown["followed_by"]] == ["BATCH-4", "LIVE-1"]
    assert shown["followed_by"][0]["requests"] == ["b", "a"]
    junit = ElementTree.fromstring(render_junit_xml(report))
    properties_shown = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties_shown["followed_by"] == (
        "PAGE-1: BATCH-4 in iteration 1, LIVE-1 at the end of the run"
    )
    failure = next(junit.iter("failure"))
    assert "Followed by BATCH-4 in iteration 1" in (failure.text or "")


def test_a_free_count_short_after_a_preemption_names_the_page_and_the_waiting_request(
    tmp_path: Path,
) -> None:
    # b is preempted and gives page 1 back, but the count goes on counting it as used.
    second = [["preempt", "b"], ["free", "b", [1]], ["alloc", "a", [2]], ["decode", ["a"]]]
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, FIRST, 4), iteration(2, second, 3))
    finding = check_log(log)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PAGE-3", 2)
    assert "6 usable pages minus 2 pages held leaves 4" in finding.message
    assert "page 1 by request 'b' (preempted, now waiting)" in finding.message
    assert (finding.requests, finding.pages) == (("b",), (1,))
    assert check_stream(log, fast=True).finding == check_stream(log, fast=False).finding


def test_a_free_count_short_with_nothing_given_back_says_nobody_holds_the_pages(
    tmp_path: Path,
) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, FIRST, 3))
    finding = check_log(log)
    assert finding is not None and finding.invariant == "PAGE-3"
    assert "no table gave back a page in this iteration: held by nobody" in finding.message
    assert "free by the tables: pages 2, 3, 4, 5" in finding.message
    assert (finding.requests, finding.pages) == ((), (2, 3, 4, 5))


def test_a_free_count_too_high_names_the_pages_taken_and_their_holders(tmp_path: Path) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, FIRST, 5))
    finding = check_log(log)
    assert finding is not None and finding.invariant == "PAGE-3"
    assert "1 page that a table holds is counted as free, among those taken" in finding.message
    assert "page 0 by request 'a' (running); page 1 by request 'b' (running)" in finding.message
    assert BY_ID[finding.invariant].layer == "safety"


def _boom(monitor: object, event: object) -> None:
    raise KeyError("a ledger left part-way")


def test_a_check_that_fails_after_a_finding_ends_checking_on_but_not_the_finding(
    tmp_path: Path,
) -> None:
    log = write(tmp_path / "l.jsonl", header(W), iteration(1, OVERTAKEN_AND_UNPAGED, 5))
    run, properties = read_run(log)
    boom = Check("boom", "completion", ("PAGE-3",), _boom)
    monitor = Monitor(run.workload, run.policy, properties)
    monitor.from_decode = (*monitor.from_decode, boom)
    finding = monitor.observe(run.events[0])
    assert finding is not None and finding.invariant == "PAGE-1"
    assert monitor.stopped == 1
    # Before any finding, a check that fails is kvsched's bug, and says so.
    clean = write(tmp_path / "clean.jsonl", header(W), iteration(1, FIRST, 4))
    run, properties = read_run(clean)
    monitor = Monitor(run.workload, run.policy, properties)
    monitor.from_decode = (*monitor.from_decode, boom)
    with pytest.raises(KeyError):
        monitor.observe(run.events[0])
