"""Requests no scheduler can hold (spec/semantics.md 1.2): a workload allows them only when it
says so, the reference rejects them as its design declares, and LIVE-5 catches an engine that
keeps one at the head of the queue, one iteration after it got there."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import EventLogError, check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.mutants.engine import engine_log
from kvsched.checks.mutants.stalls import BIG_FIRST, KeepsInfeasibleAtHead
from kvsched.cli import main
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineConfig, EngineScheduler
from kvsched.spec.invariants import BY_ID
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    WorkloadError,
    parse_workload,
    workload_to_json,
)

WRITE = engine_log(KeepsInfeasibleAtHead, BIG_FIRST)


# The workload's flag ----------------------------------------------------------------------------
def test_a_request_larger_than_the_pool_is_refused_unless_the_workload_allows_it() -> None:
    document = workload_to_json(BIG_FIRST)
    assert document["allow_infeasible"] is True
    assert parse_workload(document) == replace(BIG_FIRST, name="big-first")
    del document["allow_infeasible"]
    with pytest.raises(WorkloadError, match=r"request #0 \('big'\): needs 7 pages .*allow_inf"):
        parse_workload(document)


def test_the_flag_is_a_boolean_and_written_only_when_set() -> None:
    document = workload_to_json(BIG_FIRST) | {"allow_infeasible": 1}
    with pytest.raises(WorkloadError, match="'allow_infeasible' must be true or false"):
        parse_workload(document)
    fitting = Workload("w", Limits(1, 4, 4), (Request("a", 0, 4, 2),))
    assert "allow_infeasible" not in workload_to_json(fitting)


def test_live_5_is_a_liveness_rule_of_every_target() -> None:
    assert (BY_ID["LIVE-5"].layer, BY_ID["LIVE-5"].applies_to) == ("liveness", ("any",))


# The mutant and its twin ------------------------------------------------------------------------
def test_a_request_kept_at_the_head_is_live_5_one_iteration_after_it_got_there(
    tmp_path: Path,
) -> None:
    checked = check_stream(WRITE(tmp_path), all_findings=True)
    assert checked.finding is not None
    assert (checked.finding.invariant, checked.finding.iteration) == ("LIVE-5", 2)
    assert checked.finding.requests == ("big",)
    assert "1 more wait behind it" in checked.finding.message
    # Before LIVE-5 only the run's end said anything, and blamed the starved queue.
    assert [(f.invariant, f.iteration) for f in checked.later] == [("LIVE-1", 0)]


def test_the_engine_that_fails_it_as_it_comes_to_schedule_it_is_clean(tmp_path: Path) -> None:
    log = WRITE(tmp_path, buggy=False)
    assert check_log(log) is None
    first = json.loads(log.read_text().splitlines()[1])
    assert (first["admitted"], first["finished"]) == (["small"], ["big"])


# The reference, every design, both declarations ----------------------------------------------
MIXED = Workload(  # infeasible requests ahead of, between and behind servable ones
    "mixed-infeasible",
    Limits(batch_limit=2, page_size=4, pool_pages=9),
    (
        Request("huge", 0, 40, 2, priority=2),
        Request("a", 0, 6, 3, priority=1),
        Request("long", 1, 8, 40),
        Request("b", 1, 5, 4),
        Request("c", 3, 3, 2, priority=3),
        Request("late", 6, 36, 1),
    ),
    allow_infeasible=True,
)


@pytest.mark.parametrize("policy", ["at-head", "at-arrival"])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
def test_every_design_rejects_as_it_declares_and_drains(config: EngineConfig, policy: str) -> None:
    design = replace(config, rejects_infeasible=policy)  # type: ignore[arg-type]
    properties = design.properties()
    result = run(MIXED, EngineScheduler.configured(design), properties=properties)
    assert result.drained
    assert monitor_run(result, properties) is None
    finished = {rid: event.iteration for event in result.events for rid in event.finished}
    admitted = {rid for event in result.events for rid in event.admitted}
    assert not {"huge", "long", "late"} & admitted
    if policy == "at-arrival":  # in the iteration each arrives: time + 1
        assert (finished["huge"], finished["long"], finished["late"]) == (1, 2, 7)


ONE_SLOT = Workload(  # 'big' arrives behind 'w' while 'small' holds the only slot
    "one-slot",
    Limits(batch_limit=1, page_size=4, pool_pages=6),
    (Request("small", 0, 4, 3), Request("w", 0, 4, 1), Request("big", 1, 24, 2)),
    allow_infeasible=True,
)


def test_a_rejection_at_the_head_is_late_for_a_target_that_declares_at_arrival() -> None:
    design = replace(CONFIGS["vllm-v1"], rejects_infeasible="at-head")
    result = run(ONE_SLOT, EngineScheduler.configured(design), properties=design.properties())
    finished = {rid: event.iteration for event in result.events for rid in event.finished}
    # Queued in 2 behind 'w', with the slot full; failed in 4, when 'w' is admitted and the
    # schedule comes to it: never at the head, so in time for "at-head".
    assert finished["big"] == 4
    assert monitor_run(result, design.properties()) is None
    declared = replace(design.properties(), rejects_infeasible="at-arrival")
    finding = monitor_run(result, declared)
    assert finding is not None and (finding.invariant, finding.iteration) == ("LIVE-5", 2)


def test_a_log_declaring_its_requests_as_they_come_may_declare_one_too(tmp_path: Path) -> None:
    design = replace(CONFIGS["vllm-v1"], rejects_infeasible="at-arrival")
    properties = design.properties()
    result = run(MIXED, EngineScheduler.configured(design), properties=properties)
    log = tmp_path / "lines.jsonl"
    log.write_text("".join(line + "\n" for line in v2_lines(result, properties, requests="lines")))
    assert '"allow_infeasible":true' in log.read_text().splitlines()[0].replace(" ", "")
    assert check_log(log) is None
    refused = tmp_path / "refused.jsonl"
    refused.write_text(log.read_text().replace('"allow_infeasible":true,', "", 1))
    with pytest.raises(EventLogError, match=r"line 2: needs 11 pages.*allow_infeasible"):
        check_log(refused)


# A class checked on such a workload -------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "code", "first"),
    [("KeepsInfeasibleAtHead", 1, "LIVE-5"), ("V1", 0, None)],
)
def test_a_class_is_checked_on_a_workload_that_allows_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, code: int, first: str | None
) -> None:
    # The workload's flag reaches `kvsched check CLASS --workload`: no refusal (exit 2) for a
    # request only LIVE-5 may judge, and the engine that keeps it at the head fails LIVE-5 there.
    path = tmp_path / "big-first.json"
    path.write_text(json.dumps(workload_to_json(BIG_FIRST)), encoding="utf-8")
    module = "kvsched.checks.mutants.stalls" if target != "V1" else "kvsched.checks.mutants.engine"
    argv = ["check", f"{module}:{target}", "--workload", str(path), "--no-hypothesis"]
    assert main(argv) == code
    out = capsys.readouterr().out
    assert first is None or f"VIOLATION found: {first}" in out, out


def test_a_request_no_pool_holds_is_unservable_only_where_the_workload_does_not_allow_it() -> None:
    # What the check, the trial and the shrink ask before running a workload: one that allows
    # such a request keeps it for LIVE-5 (a shrink of a LIVE-5 witness must keep it too).
    declared = KeepsInfeasibleAtHead.properties
    assert declared.unservable(BIG_FIRST) == ""
    assert "'big' needs 7 pages" in declared.unservable(replace(BIG_FIRST, allow_infeasible=False))
