"""The learner path: the adapter, the allocator check, and what a learner reads back."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given

from kvsched.checks.judge.allocator import (
    CORNER_CASES,
    VALUE_CASES,
    check_allocator,
)
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.search.strategies import workloads
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.learner import learner_factory
from kvsched.checks.targets.load import load_target
from kvsched.checks.verdict.machine import render_json, render_junit_xml
from kvsched.checks.verdict.render import render_table
from kvsched.reference import POLICIES, allocate_kv_pages, run
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "learner"
# The buggy solutions, one copy, installed with the mutant zoo.
MUTANTS = Path(__file__).resolve().parents[2] / "checks" / "mutants" / "learner"
FAST = CheckOptions(hypothesis=False, families=False)


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORRECT = _module("correct")


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_correct_solution_matches_the_reference_event_for_event_on_the_teaching_trace(
    policy: str,
) -> None:
    workload = load_teaching_trace()
    learner = run(workload, learner_factory(CORRECT.schedule_iteration, policy), policy=policy)
    reference = run(workload, POLICIES[policy], policy=policy)
    assert learner.events == reference.events
    assert learner.drained and learner.fault is None


@given(workloads())
def test_correct_solution_matches_the_reference_on_generated_workloads(workload: Workload) -> None:
    # Among them one-token requests that finish in their admission iteration: the adapter must
    # still report admissions in queue order.
    for policy in ("static", "continuous"):
        factory = learner_factory(CORRECT.schedule_iteration, policy)
        assert run(workload, factory, policy).events == run(workload, POLICIES[policy]).events


def _learner_finding(schedule: Any, policy: str = "continuous") -> Any:
    workload = Workload(
        "two", Limits(batch_limit=2, page_size=4, pool_pages=8), (Request("a", 0, 3, 3),)
    )
    return monitor_run(run(workload, learner_factory(schedule, policy), policy=policy))


def test_a_missing_return_is_protocol_breach_that_says_so() -> None:
    def forgets_return(state: dict[str, Any], limits: dict[str, int], policy: str) -> None:
        CORRECT.schedule_iteration(state, limits, policy)

    finding = _learner_finding(forgets_return)
    assert finding.invariant == "PROTO-1"
    assert "forget `return state`" in finding.message


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda s: [s], "must return the state dict"),
        (lambda s: {k: v for k, v in s.items() if k != "free_pages"}, "no key 'free_pages'"),
        (lambda s: {**s, "running": [{"id": "a", "generated": 1}]}, "'pages' must be a list"),
        (lambda s: {**s, "free_pages": ["x"]}, "not a page id"),
    ],
)
def test_an_unreadable_state_names_what_is_wrong(damage: Any, words: str) -> None:
    def broken(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        return damage(CORRECT.schedule_iteration(state, limits, policy))

    finding = _learner_finding(broken)
    assert finding.invariant == "PROTO-1"
    assert words in finding.message


def test_clearing_a_finished_requests_pages_is_explained() -> None:
    def clears(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        state = CORRECT.schedule_iteration(state, limits, policy)
        for request in state["finished"]:
            request["pages"] = []
        return state

    finding = _learner_finding(clears)
    assert finding.invariant == "PROTO-1"
    assert "leave a finished request's pages as they were" in finding.message


@pytest.mark.parametrize(
    ("change", "invariant", "words"),
    [
        (lambda r: r.update(generated=r["generated"] + 1), "DEC-2", "but is finished"),
        (lambda r: r.update(generated=r["generated"] - 1), "PROTO-1", "'generated' went down"),
        (lambda r: r["pages"].append(0), "PROTO-1", "had finished, yet its 'pages' changed"),
        (lambda r: r.update(output_tokens=9), "PROTO-1", "its 'output_tokens' changed"),
        (lambda r: r.update(mine=True), None, ""),  # a field of the learner's own: not read
    ],
)
def test_a_request_that_finished_earlier_is_read_too(
    change: Any, invariant: str | None, words: str
) -> None:
    def changes(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        earlier = [request["id"] for request in state["finished"]]
        state = CORRECT.schedule_iteration(state, limits, policy)
        for request in state["finished"]:
            if request["id"] in earlier:
                change(request)
        return state

    workload = Workload(
        "one-then-another",
        Limits(batch_limit=2, page_size=4, pool_pages=8),
        (Request("a", 0, 3, 1), Request("b", 0, 3, 4)),
    )
    finding = monitor_run(run(workload, learner_factory(changes, "continuous")))
    assert (finding and finding.invariant) == invariant
    assert words in (finding.message if finding else "")


def test_two_generated_tokens_in_one_call_are_two_tokens_dec_1() -> None:
    def double(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        state = CORRECT.schedule_iteration(state, limits, policy)
        for request in state["running"]:
            request["generated"] += 1
        return state

    assert _learner_finding(double).invariant == "DEC-1"


def test_the_learner_gets_a_copy_and_cannot_corrupt_the_adapter_state() -> None:
    seen: list[dict[str, Any]] = []

    def hoarding(state: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        seen.append(state)
        result = CORRECT.schedule_iteration(copy.deepcopy(state), limits, policy)
        if len(seen) > 1:
            seen[0]["free_pages"].clear()  # changing an old state must not matter
        return result

    assert _learner_finding(hoarding) is None


def test_the_allocator_check_passes_the_reference_and_the_example() -> None:
    deadline = Deadline(5.0)
    for allocate in (allocate_kv_pages, CORRECT.allocate_kv_pages):
        verdict = check_allocator(allocate, deadline)
        assert verdict.finding is None
        assert verdict.calls > 20


@pytest.mark.parametrize(
    ("allocate", "words"),
    [
        (lambda tokens, page_size=16: {"pages": tokens // page_size + 1, "capacity": 0,
                                       "wastedSlots": 0}, "allocate_kv_pages(0)"),
        (lambda tokens, page_size=16: {"pages": -(-tokens // page_size)}, "'capacity' is missing"),
    ],
)  # fmt: skip
def test_a_wrong_allocator_is_page_1_with_the_call_and_the_rule(allocate: Any, words: str) -> None:
    finding = check_allocator(allocate, Deadline(5.0)).finding
    assert finding is not None
    assert finding.invariant == "PAGE-1"
    assert words in finding.message


def lessons_reference(tokens: Any, page_size: Any = 16) -> Any:
    """The lesson's own solution: the rule, no validation (its inputs are a precondition)."""
    pages = (tokens + page_size - 1) // page_size
    return {
        "pages": pages,
        "capacity": pages * page_size,
        "wastedSlots": pages * page_size - tokens,
    }


def float_ceil(tokens: Any, page_size: Any = 16) -> Any:
    pages = math.ceil(tokens / page_size)
    return {
        "pages": pages,
        "capacity": pages * page_size,
        "wastedSlots": pages * page_size - tokens,
    }


def value_error_everywhere(tokens: Any, page_size: Any = 16) -> Any:
    if type(tokens) is not int or type(page_size) is not int or tokens < 0 or page_size < 1:
        raise ValueError("bad input")
    return allocate_kv_pages(tokens, page_size)


def test_a_float_ceil_allocator_fails_above_2_53_only() -> None:
    finding = check_allocator(float_ceil, Deadline(5.0)).finding
    assert finding is not None and finding.invariant == "PAGE-1"
    assert "9007199254740993" in finding.message  # 2**53 + 1, the first integer float rounds
    assert "Float division rounds integers above 2**53" in finding.message
    assert all(float_ceil(t, p or 16) == allocate_kv_pages(t, p or 16) for t, p in CORNER_CASES)


def test_the_explicit_examples_reach_past_every_fixed_width() -> None:
    tokens = {t for t, _ in VALUE_CASES}
    assert {2**53 - 1, 2**53, 2**53 + 1, 2**63, 10**30} <= tokens


@pytest.mark.parametrize("allocate", [lessons_reference, value_error_everywhere])
def test_correct_allocators_pass_whatever_they_do_outside_the_domain(allocate: Any) -> None:
    verdict = check_allocator(allocate, Deadline(5.0))
    assert verdict.finding is None
    assert verdict.advice  # ... and are told the Pythonic way, as advice
    assert all("the Pythonic way is to raise" in line for line in verdict.advice)


def test_the_pythonic_allocator_gets_no_advice() -> None:
    verdict = check_allocator(CORRECT.allocate_kv_pages, Deadline(5.0), strict_inputs=True)
    assert verdict.finding is None and verdict.advice == ()


@pytest.mark.parametrize(
    ("allocate", "words"),
    [
        (lessons_reference, "allocate_kv_pages(-1, 16) returned"),
        (value_error_everywhere, "raised ValueError; the Pythonic way is to raise TypeError"),
    ],
)
def test_strict_inputs_grades_the_advice(allocate: Any, words: str) -> None:
    finding = check_allocator(allocate, Deadline(5.0), strict_inputs=True).finding
    assert finding is not None and finding.invariant == "PAGE-1"
    assert words in finding.message and "--strict-inputs" in finding.message


def test_one_allocator_verdict_in_table_json_and_junit(tmp_path: Path) -> None:
    """A wrong allocate_kv_pages beside a scheduler that counts pages right: PAGE-1 is violated
    everywhere the report shows it, not held in the tables under an allocator that violates it."""
    solution = tmp_path / "wrong_allocator.py"
    source = (EXAMPLES / "correct.py").read_text()
    solution.write_text(
        source + "\n\n_right = allocate_kv_pages\n\n"
        "def allocate_kv_pages(tokens, page_size=16):\n"
        "    return dict(_right(tokens, page_size), pages=0) if tokens == 17 else "
        "_right(tokens, page_size)\n"
    )
    report = check_target(load_target(str(solution)), FAST)
    assert report.allocator is not None and report.allocator.finding is not None
    assert report.exit_code == 1
    for verdict in report.verdicts:
        assert verdict.finding is None  # the runs themselves are fine ...
        assert not verdict.ok  # ... but the verdict is not
        row = next(r for r in verdict.invariants if r.invariant == "PAGE-1")
        assert row.status == "violated" and "allocate_kv_pages called directly" in row.how
    document = json.loads(render_json(report))
    assert document["ok"] is False and document["allocator"]["ok"] is False
    assert all(v["ok"] is False for v in document["verdicts"])
    junit = ElementTree.fromstring(render_junit_xml(report))
    failed = {
        c.get("name", "").split()[0]
        for c in junit.iter("testcase")
        if c.find("failure") is not None
    }
    assert failed == {"PAGE-1"}


def test_a_hanging_allocator_gets_a_verdict() -> None:
    def hangs(tokens: Any, page_size: Any = 16) -> Any:
        while True:
            pass

    finding = check_allocator(hangs, Deadline(0.2)).finding
    assert finding is not None
    assert finding.invariant == "PROTO-1"
    assert "did not return within" in finding.message


def test_a_buggy_solution_gets_the_smallest_workload_in_words() -> None:
    report = check_target(load_target(str(MUTANTS / "buggy_leak.py")), FAST)
    assert report.exit_code == 1
    for verdict in report.verdicts:
        assert verdict.finding is not None and verdict.finding.invariant == "PAGE-3"
        assert verdict.counterexample is not None
        assert len(verdict.counterexample.workload.requests) == 1  # shrunk from nine
    text = render_table(report)
    assert "Smallest failing workload" in text
    assert "a: arrives at time 0 (may join from iteration 1)" in text


def test_static_only_bug_shows_under_static_and_not_continuous() -> None:
    report = check_target(load_target(str(MUTANTS / "buggy_static.py")), FAST)
    outcome = {v.policy: v.finding.invariant if v.finding else None for v in report.verdicts}
    assert outcome == {"static": "BATCH-2", "continuous": None}


def test_a_file_with_only_the_allocator_is_checked_on_the_allocator(tmp_path: Path) -> None:
    solution = tmp_path / "only_pages.py"
    solution.write_text("def allocate_kv_pages(tokens, page_size=16):\n    return 'no'\n")
    report = check_target(load_target(str(solution)), FAST)
    assert report.verdicts == ()
    assert report.allocator is not None and report.allocator.finding is not None
    assert report.exit_code == 1
    assert "defines no schedule_iteration" in report.reasons[0]  # the finding still wins
