"""PAGE-7, under asynchronous scheduling a page given back waits for the step in flight
(spec/semantics.md 8.3): a page an update gave back handed out in the next iteration, or one a
preemption gave back handed out in the same schedule, is caught; the same logs of a synchronous
target are clean, and so is an engine that fences what it gives back."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.eventlog.jsonl import write_log as write_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.monitor.fenced import _reused
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.mutants.inflight import MUTANTS, FencesInFlightPages
from kvsched.checks.verdict.declarations import excuses
from kvsched.reference.engine import run
from kvsched.spec.applicability import applicable
from kvsched.spec.invariants import BY_ID
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload, workload_to_json

WRITE = MUTANTS[0].write
assert WRITE is not None


def test_page_7_is_a_safety_rule_of_targets_that_declare_async_scheduling() -> None:
    assert BY_ID["PAGE-7"].layer == "safety"
    assert BY_ID["PAGE-7"].applies_to == ("declared",)
    plain = TargetProperties(policy="continuous")
    assert "PAGE-7" not in {i.id for i in applicable("continuous", plain)}
    declared = replace(plain, async_scheduling=True)
    assert "PAGE-7" in {i.id for i in applicable("continuous", declared)}


def test_a_finished_requests_page_handed_out_next_iteration_is_page_7(tmp_path: Path) -> None:
    checked = check_stream(WRITE(tmp_path), all_findings=True)
    assert checked.finding is not None
    assert (checked.finding.invariant, checked.finding.iteration) == ("PAGE-7", 2)
    assert checked.finding.pages == (1,) and checked.finding.requests == ("c",)
    assert "given back in iteration 1" in checked.finding.message
    assert checked.later == ()  # no other rule catches it


def test_the_same_log_of_a_synchronous_target_is_clean(tmp_path: Path) -> None:
    log = WRITE(tmp_path)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    del rows[0]["target"]["async_scheduling"]
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert check_log(log) is None


def test_the_engine_that_fences_its_frees_is_clean(tmp_path: Path) -> None:
    # It leaves 'c' waiting in iteration 2 while page 1 is fenced: not BATCH-3, since the
    # page is no room for that schedule, and the iteration that waits for the fence in
    # iteration 4 grows LIVE-1's bound.
    log = WRITE(tmp_path, buggy=False)
    assert check_log(log) is None
    second = json.loads(log.read_text().splitlines()[2])
    assert second["admitted"] == [] and second["waiting"] == ["c", "d"]


# Two requests grow into a full pool of two pages; 'w' is preempted for 'v', which takes the
# page 'w' gave back in the same schedule and finishes; 'w' comes back and finishes.
TWO = Workload(
    "preempted-and-taken",
    Limits(batch_limit=2, page_size=2, pool_pages=2),
    (Request("v", 0, 2, 2), Request("w", 0, 2, 2)),
)
LINES: list[tuple[list[Any], int]] = [
    ([["admit", "v"], ["alloc", "v", [0]], ["admit", "w"], ["alloc", "w", [1]],
      ["compute", "v", 2], ["compute", "w", 2], ["token", "v"], ["token", "w"]], 0),
    ([["preempt", "w"], ["free", "w", [1]], ["alloc", "v", [1]], ["decode", ["v"]],
      ["finish", "v"], ["free", "v", [0, 1]]], 2),
    ([], 2),
    ([["admit", "w"], ["alloc", "w", [0, 1]], ["compute", "w", 3], ["token", "w"],
      ["finish", "w"], ["free", "w", [0, 1]]], 2),
]  # fmt: skip


def write_log(path: Path, target: TargetProperties, lines: list[tuple[list[Any], int]]) -> Path:
    header = {
        "type": "header",
        "format": "kvsched-eventlog",
        "version": 2,
        "workload": workload_to_json(TWO),
        "target": properties_to_json(target),
    }
    rows: list[dict[str, Any]] = [header]
    for n, (ops, free) in enumerate(lines, start=1):
        rows.append({"type": "iteration", "iteration": n, "ops": ops, "free_pages": free})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


SYNC = TargetProperties(
    policy="continuous", admission="lazy", token_budget=16, chunked_prefill=True, preemption=True
)


def test_a_page_a_preemption_gave_back_taken_in_the_same_schedule_is_page_7(
    tmp_path: Path,
) -> None:
    target = replace(SYNC, async_scheduling=True)
    finding = check_log(write_log(tmp_path / "async.jsonl", target, LINES))
    assert finding is not None and (finding.invariant, finding.iteration) == ("PAGE-7", 2)
    assert finding.requests == ("v", "w") and finding.pages == (1,)
    assert "earlier in the same schedule" in finding.message


def test_the_fenced_run_waits_an_iteration_and_is_clean(tmp_path: Path) -> None:
    # Fenced: 'v' waits for 'w''s page until the next iteration, and 'w' for the pages 'v'
    # gave back for one more: iteration 3 computes nothing, which LIVE-1's bound allows.
    fenced: list[tuple[list[Any], int]] = [
        LINES[0],
        ([["preempt", "w"], ["free", "w", [1]]], 1),
        ([["alloc", "v", [1]], ["decode", ["v"]], ["finish", "v"], ["free", "v", [0, 1]]], 2),
        ([], 2),
        LINES[3],
    ]
    target = replace(SYNC, async_scheduling=True)
    assert check_log(write_log(tmp_path / "fenced.jsonl", target, fenced)) is None


def test_the_same_schedule_of_a_synchronous_target_is_clean(tmp_path: Path) -> None:
    lines = [LINES[0], LINES[1], LINES[3]]
    assert check_log(write_log(tmp_path / "sync.jsonl", SYNC, lines)) is None


TINY = Workload(
    "one-page",
    Limits(batch_limit=1, page_size=1, pool_pages=2),
    (Request("a", 0, 0, 1), Request("b", 0, 0, 1)),
)


def test_an_iteration_spent_waiting_for_the_fence_grows_the_bound(tmp_path: Path) -> None:
    # One usable page: 'b' waits in iteration 2 while the page 'a' gave back is fenced, and
    # drains in iteration 3, one past the lesson's bound, which the engine loop and the monitor
    # both allow (the run would otherwise stop undrained: LIVE-1).
    properties = FencesInFlightPages.properties
    recorded = run(TINY, FencesInFlightPages, properties.policy, properties=properties)
    assert recorded.drained and len(recorded.events) == 3
    assert recorded.events[1].decoded == ()
    path = tmp_path / "tiny.jsonl"
    write_run(recorded, path, properties)
    assert check_log(path) is None


def test_the_verdict_says_what_the_fence_excused() -> None:
    # In iteration 2 of the one-page run nothing runs while 'b' waits for the page 'a' gave
    # back, fenced: LIVE-2 and BATCH-3 would have read it as a head that fitted.
    properties = FencesInFlightPages.properties
    finding, excused = watch_run(
        run(TINY, FencesInFlightPages, properties.policy, properties=properties), properties
    )
    assert finding is None
    listed = {e.declaration: e for e in excuses(properties, "continuous", excused)}
    excuse = listed["async_scheduling"]
    assert excuse.invariants == ("BATCH-3", "LIVE-1", "LIVE-2", "LIVE-4")
    assert excuse.excused.startswith(
        "1 iteration left a head waiting that fitted but for pages fenced for the step in "
        "flight, and LIVE-1's bound grew by 1 iteration waiting for them"
    ), excuse.excused


def test_a_hit_on_a_page_given_back_is_not_page_7() -> None:
    # A hit takes a full page, which the step in flight no longer writes: vLLM's fix lets a
    # fenced full page be hit. Taken fresh, the same page is PAGE-7.
    monitor: Any = SimpleNamespace(pages=SimpleNamespace(given_back={1: 1}))
    assert _reused(monitor, 2, {"c": (1, 2)}, {"c": (1,)}) is None
    found = _reused(monitor, 2, {"c": (1, 2)}, {})
    assert found is not None and (found.invariant, found.pages) == ("PAGE-7", (1,))
