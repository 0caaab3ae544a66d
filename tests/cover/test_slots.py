"""SLOT-1 and SLOT-2, per-request state slots beside the pages (spec/semantics.md 4.2, 8.4): each
rule fires on a run with one slot report broken and names the holder and the slot; the correct
design with a pool of two slots is clean, and the mutants of checks/mutants/hybrid.py are caught
with their own ids on small workloads; without the declaration neither rule applies."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.eventlog.jsonl import EventLogError, check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.mutants.hybrid import (
    AbortsOddPrompts,
    FreesSlotTwice,
    HybridV1,
    KeepsSlotOnAbort,
    KeepsSlotOnFailedAdmission,
)
from kvsched.reference.engine import Run, run
from kvsched.spec.applicability import applicable
from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import BY_ID
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.text import describe_event
from kvsched.spec.workload import Limits, Request, Workload

HYBRID = HybridV1.properties


class V1Budget16(HybridV1):
    """The same design without state slots."""

    config = replace(HybridV1.config, state_slots=None)
    properties = replace(HYBRID, state_slots=None)


# 'a' takes both usable pages: 'b' finds a slot free but no page until 'a' finishes.
TIGHT = Workload(
    "tight",
    Limits(batch_limit=2, page_size=2, pool_pages=4),
    (Request("a", 0, 4, 3), Request("b", 0, 4, 2)),
)
# Both grow into a full pool: 'b' is preempted in iteration 2 and comes back after 'a'.
GROW = Workload(
    "grow",
    Limits(batch_limit=3, page_size=2, pool_pages=4),
    (Request("a", 0, 2, 4), Request("b", 0, 2, 4)),
)
# Three short requests in a roomy pool: two slots bind before the batch limit of three does.
ROOMY = Workload(
    "roomy",
    Limits(batch_limit=3, page_size=2, pool_pages=16),
    (Request("a", 0, 2, 3), Request("b", 0, 2, 3), Request("c", 0, 2, 3)),
)


# 'a' (an odd prompt) is aborted by its client after its first token; 'c' takes its slot.
ABORTS = Workload(
    "aborts",
    Limits(batch_limit=2, page_size=2, pool_pages=8),
    (Request("a", 0, 3, 3), Request("b", 0, 2, 2), Request("c", 1, 2, 2)),
)


def recorded(workload: Workload, target: type[HybridV1] = HybridV1) -> Run:
    return run(workload, target, HYBRID.policy, properties=target.properties)


def judged(result: Run, properties: TargetProperties = HYBRID) -> Finding | None:
    return watch_run(result, properties)[0]


def planted(result: Run, n: int, **changes: Any) -> Run:
    """``result`` with iteration ``n``'s event changed."""
    events = list(result.events)
    events[n - 1] = replace(events[n - 1], **changes)
    return replace(result, events=tuple(events))


def test_the_slot_rules_are_safety_rules_of_targets_that_declare_state_slots() -> None:
    for rule in ("SLOT-1", "SLOT-2"):
        assert (BY_ID[rule].layer, BY_ID[rule].applies_to) == ("safety", ("declared",))
    plain = replace(HYBRID, state_slots=None)
    assert {"SLOT-1", "SLOT-2"}.isdisjoint(i.id for i in applicable("continuous", plain))
    assert {"SLOT-1", "SLOT-2"} <= {i.id for i in applicable("continuous", HYBRID)}


@pytest.mark.parametrize("workload", [TIGHT, GROW, ROOMY], ids=lambda w: w.name)
def test_the_correct_design_with_two_slots_is_clean(workload: Workload) -> None:
    result = recorded(workload)
    assert result.drained and judged(result) is None
    held = [len(e.slots or {}) for e in result.events]
    assert max(held) <= 2


def test_an_idle_batch_slot_while_both_state_slots_are_held_is_excused_and_counted() -> None:
    # The same run judged as if it had no state slots: 'c' waits with a batch slot free.
    result = recorded(ROOMY)
    finding, excused = watch_run(result, HYBRID)
    assert finding is None and excused.slotless_heads == 3
    undeclared = replace(HYBRID, state_slots=None)
    finding = judged(result, undeclared)
    assert finding is not None and (finding.invariant, finding.requests) == ("BATCH-3", ("c",))


def test_a_waiting_request_holding_a_slot_after_the_schedule_is_slot_2() -> None:
    result = planted(recorded(TIGHT), 1, slots={"a": 0, "b": 1})
    finding = judged(result)
    assert finding is not None and (finding.invariant, finding.iteration) == ("SLOT-2", 1)
    assert finding.requests == ("b",)
    assert "holds state slot 1 after the schedule of iteration 1 but is waiting" in finding.message


def test_a_finished_request_keeping_its_slot_after_the_update_is_slot_2() -> None:
    result = planted(recorded(TIGHT), 3, slots_after={"a": 0}, free_slots=1)
    finding = judged(result)
    assert finding is not None and (finding.invariant, finding.iteration) == ("SLOT-2", 3)
    assert finding.requests == ("a",)
    assert "still holds state slot 0 after iteration 3 but finished in iteration 3" in (
        finding.message
    )


def test_a_preempted_request_keeping_its_slot_is_slot_2() -> None:
    result = planted(recorded(GROW), 2, slots={"a": 0, "b": 1})
    finding = judged(result)
    assert finding is not None and finding.invariant == "SLOT-2"
    assert finding.requests == ("b",) and "was preempted in iteration 2" in finding.message


@pytest.mark.parametrize(
    ("slots", "named", "words"),
    [
        ({"a": 0, "b": 0}, ("a", "b"), "both hold state slot 0 after the schedule"),
        ({"a": 0, "b": 2}, ("b",), "holds state slot 2 after the schedule of iteration 1, outside"),
        ({"a": 0}, ("b",), "runs in iteration 1 without a state slot"),
    ],
)
def test_a_slot_shared_outside_the_pool_or_missing_is_slot_1(
    slots: dict[str, int], named: tuple[str, ...], words: str
) -> None:
    result = planted(recorded(GROW), 1, slots=slots)
    finding = judged(result)
    assert finding is not None and (finding.invariant, finding.iteration) == ("SLOT-1", 1)
    assert finding.requests == named and words in finding.message


def test_a_free_slot_count_that_does_not_add_up_is_slot_1() -> None:
    result = planted(recorded(GROW), 1, free_slots=1)
    finding = judged(result)
    assert finding is not None and (finding.invariant, finding.iteration) == ("SLOT-1", 1)
    assert "counts 1 state slot free after iteration 1, but 2 of its 2 are held" in (
        finding.message
    )


def test_declared_slots_left_unreported_are_proto_1() -> None:
    result = planted(recorded(TIGHT), 2, slots_after=None)
    finding = judged(result)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PROTO-1", 2)
    assert "did not report StepOutcome.slots" in finding.message


def test_without_the_declaration_slot_reports_are_not_judged() -> None:
    result = planted(recorded(TIGHT), 1, slots={"a": 0, "b": 0})
    assert judged(result, replace(HYBRID, state_slots=None)) is None


def test_a_malformed_slot_report_stops_the_run_with_proto_1() -> None:
    class NegativeSlot(HybridV1):
        def schedule(self) -> ScheduledBatch:
            return replace(super().schedule(), slots={"a": -1})

    class TextCount(HybridV1):
        def update_from_output(self, output: ModelOutput) -> StepOutcome:
            return replace(super().update_from_output(output), free_slots="1")  # type: ignore[arg-type]

    fault = recorded(TIGHT, NegativeSlot).fault
    assert fault is not None and "ScheduledBatch.slots['a'] must be a slot id" in fault.message
    fault = recorded(TIGHT, TextCount).fault
    assert fault is not None and "StepOutcome.free_slots must be an integer" in fault.message


def test_the_mutants_are_caught_with_their_own_ids_first() -> None:
    kept = judged(recorded(TIGHT, KeepsSlotOnFailedAdmission))
    assert kept is not None and (kept.invariant, kept.iteration, kept.requests) == (
        "SLOT-2",
        1,
        ("b",),
    )
    twice = judged(recorded(GROW, FreesSlotTwice))
    assert twice is not None and (twice.invariant, twice.iteration) == ("SLOT-1", 2)
    assert "counts 2 state slots free after iteration 2" in twice.message
    aborting = AbortsOddPrompts.properties
    assert judged(recorded(ABORTS, AbortsOddPrompts), aborting) is None
    kept = judged(recorded(ABORTS, KeepsSlotOnAbort), aborting)
    assert kept is not None and (kept.invariant, kept.iteration, kept.requests) == (
        "SLOT-2",
        1,
        ("a",),
    )
    assert "'a' still holds state slot 0 after iteration 1 but finished" in kept.message


def write(path: Path, result: Run, properties: TargetProperties = HYBRID) -> Path:
    path.write_text("\n".join(v2_lines(result, properties)) + "\n")
    return path


@pytest.mark.parametrize("workload", [TIGHT, GROW, ROOMY, ABORTS], ids=lambda w: w.name)
@pytest.mark.parametrize(
    "target",
    [HybridV1, KeepsSlotOnFailedAdmission, FreesSlotTwice, AbortsOddPrompts, KeepsSlotOnAbort],
)
def test_a_log_carries_the_slots_and_is_judged_as_the_run(
    workload: Workload, target: type[HybridV1], tmp_path: Path
) -> None:
    result = recorded(workload, target)
    path = write(tmp_path / "run.jsonl", result, target.properties)
    expected = judged(result, target.properties)
    for fast in (False, True):
        found = check_stream(path, fast=fast).finding
        same = (found.invariant, found.iteration, found.requests) if found else None
        assert same == (
            (expected.invariant, expected.iteration, expected.requests) if expected else None
        )


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rewrite(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_logged_finish_without_its_unslot_is_slot_2(tmp_path: Path) -> None:
    lines = rows(write(tmp_path / "run.jsonl", recorded(TIGHT)))
    third = lines[3]
    assert third["ops"][-1] == ["unslot", "a", 0]
    del third["ops"][-1]
    third["free_slots"] = 2  # the engine's count, right or not, does not hide the holder
    finding = check_log(rewrite(tmp_path / "leak.jsonl", lines))
    assert finding is not None and (finding.invariant, finding.iteration) == ("SLOT-2", 3)
    assert "'a' still holds state slot 0 after iteration 3 but finished" in finding.message


def test_a_log_line_without_its_slot_count_or_with_one_undeclared_is_refused(
    tmp_path: Path,
) -> None:
    lines = rows(write(tmp_path / "run.jsonl", recorded(TIGHT)))
    del lines[2]["free_slots"]
    with pytest.raises(EventLogError, match="missing field 'free_slots'"):
        check_log(rewrite(tmp_path / "missing.jsonl", lines))
    plain = rows(
        write(tmp_path / "plain.jsonl", recorded(TIGHT, V1Budget16), V1Budget16.properties)
    )
    plain[1]["free_slots"] = 2
    with pytest.raises(EventLogError, match="'free_slots' is given, but the header declares no"):
        check_log(rewrite(tmp_path / "undeclared.jsonl", plain))
    del plain[1]["free_slots"]
    plain[1]["ops"].insert(1, ["slot", "a", 0])
    with pytest.raises(EventLogError, match="'slot' takes or gives back a state slot, but"):
        check_log(rewrite(tmp_path / "undeclared-op.jsonl", plain))


def test_the_events_carry_both_snapshots() -> None:
    first: IterationEvent = recorded(GROW).events[1]
    assert (first.slots, first.slots_after, first.free_slots) == ({"a": 0}, {"a": 0}, 1)


def test_the_last_iterations_of_a_finding_show_who_holds_which_slot() -> None:
    kept = judged(recorded(TIGHT, KeepsSlotOnFailedAdmission))
    assert kept is not None
    first = describe_event(kept.recent[-1])
    assert "state slots a 0, b 1;" in first and "0 state slots free; waiting b" in first
    finished = describe_event(recorded(TIGHT).events[2])
    assert "a finishes, frees page ids [1 2 3]; then state slots none held;" in finished
