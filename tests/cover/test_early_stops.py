"""Early stops (spec/eventlog.md 4.9): a target that declares ``stops_early`` may finish a
request from the batch before its output length, which is then its most; nothing else of REQ-2
is relaxed, and undeclared, an early finish is REQ-2 with a finding that says what to declare."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_eventlog import validator
from test_eventlog_v2 import header, iteration, write
from test_steady import assert_same

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.spec.properties import TargetProperties, parse_properties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload

# a may make 3 tokens and stops after 2 (an end-of-sequence token); b makes its 2 and finishes.
W = Workload("stops", Limits(2, 2, 8), (Request("a", 0, 2, 3), Request("b", 0, 4, 2)))
STOPS = TargetProperties("continuous", admission="lazy", token_budget=8, stops_early=True)
FIRST = [
    ["admit", "a"], ["alloc", "a", [0]], ["admit", "b"], ["alloc", "b", [1, 2]],
    ["compute", "a", 2], ["compute", "b", 4], ["token", "a"], ["token", "b"],
]  # fmt: skip
SECOND = [
    ["alloc", "a", [3]], ["alloc", "b", [4]], ["decode", ["a", "b"]],
    ["finish", "a"], ["finish", "b"], ["free", "a", [0, 3]], ["free", "b", [1, 2, 4]],
]  # fmt: skip


def log(tmp_path: Path, target: TargetProperties, *lines: tuple[list[Any], int]) -> Path:
    """A log of ``W`` whose iterations are ``lines``: each its operations and the pages held."""
    rows = [iteration(n, ops, 8 - held) for n, (ops, held) in enumerate(lines, 1)]
    return write(tmp_path / "stops.jsonl", header(W, target), *rows)


def stopped(tmp_path: Path, target: TargetProperties) -> Path:
    return log(tmp_path, target, (FIRST, 3), (SECOND, 0))


def test_a_declared_early_stop_checks_clean_on_both_paths(tmp_path: Path) -> None:
    path = stopped(tmp_path, STOPS)
    assert check_log(path) is None
    assert check_stream(path).finding is None
    assert_same(path)


def test_an_undeclared_early_stop_is_req_2_and_says_what_to_declare(tmp_path: Path) -> None:
    finding = check_log(stopped(tmp_path, replace(STOPS, stops_early=False)))
    assert finding is not None and (finding.invariant, finding.iteration) == ("REQ-2", 2)
    assert "'a' was finished in iteration 2 after 2 of its 3 output tokens" in finding.message
    assert "declares stops_early (spec/eventlog.md 4.9)" in finding.message


def test_a_request_that_reaches_its_most_must_still_finish(tmp_path: Path) -> None:
    # a decodes a third time and makes its third token, its most, but is not finished.
    second = [op for op in SECOND if op[:2] not in (["finish", "a"], ["free", "a"])]
    third = [["decode", ["a"]]]
    finding = check_log(log(tmp_path, STOPS, (FIRST, 3), (second, 2), (third, 2)))
    assert finding is not None and (finding.invariant, finding.iteration) == ("REQ-2", 3)
    assert "produced its last token (3)" in finding.message


def test_an_abort_mid_prefill_finishes_a_request_with_no_output(tmp_path: Path) -> None:
    target = replace(STOPS, chunked_prefill=True, token_budget=2)
    workload = Workload("abort", Limits(1, 2, 4), (Request("a", 0, 4, 2),))
    first = [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 2]]
    second = [["finish", "a"], ["free", "a", [0]]]
    path = write(
        tmp_path / "abort.jsonl",
        header(workload, target),
        iteration(1, first, 3),
        iteration(2, second, 4),
    )
    assert check_log(path) is None
    assert_same(path)
    undeclared = write(
        tmp_path / "undeclared.jsonl",
        header(workload, replace(target, stops_early=False)),
        iteration(1, first, 3),
        iteration(2, second, 4),
    )
    finding = check_log(undeclared)
    assert finding is not None and finding.invariant == "REQ-2"
    assert "after 0 of its 2 output tokens" in finding.message


def test_an_abort_from_the_queue_finishes_a_waiting_request(tmp_path: Path) -> None:
    # One slot: b waits while a runs, and is aborted from the queue; then c is admitted.
    three = (Request("a", 0, 2, 1), Request("b", 0, 2, 1), Request("c", 0, 2, 1))
    workload = Workload("queue", Limits(1, 2, 4), three)
    first = [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 2], ["token", "a"]]
    first += [["finish", "a"], ["finish", "b"], ["free", "a", [0]]]
    second = [["admit", "c"], ["alloc", "c", [1]], ["compute", "c", 2], ["token", "c"]]
    second += [["finish", "c"], ["free", "c", [1]]]
    rows = [iteration(1, first, 4, waiting=["c"]), iteration(2, second, 4)]
    path = write(tmp_path / "q.jsonl", header(workload, STOPS), *rows)
    assert check_log(path) is None
    assert_same(path)
    undeclared = replace(STOPS, stops_early=False)
    path = write(tmp_path / "u.jsonl", header(workload, undeclared), *rows)
    finding = check_log(path)
    assert finding is not None and (finding.invariant, finding.iteration) == ("REQ-2", 1)
    assert "'b' was finished in iteration 1 but is waiting" in finding.message
    assert "aborts them, declares stops_early" in finding.message


def test_a_finished_request_cannot_be_aborted_again(tmp_path: Path) -> None:
    second = [*SECOND, ["finish", "a"]]
    finding = check_log(log(tmp_path, STOPS, (FIRST, 3), (second, 0)))
    assert finding is not None and finding.invariant == "REQ-2", finding


def test_the_declaration_is_written_only_when_made() -> None:
    assert "stops_early" not in properties_to_json(replace(STOPS, stops_early=False))
    document = properties_to_json(STOPS)
    assert document["stops_early"] is True
    assert parse_properties(document) == STOPS
    line = header(W, STOPS)
    validator().validate(line)
    assert not validator().is_valid({**line, "target": {**document, "stops_early": "yes"}})


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_stops_early_is_a_boolean(value: object) -> None:
    with pytest.raises(ValueError, match="field 'stops_early' must be a boolean"):
        parse_properties({"policy": "continuous", "stops_early": value})


def test_a_header_that_declares_it_reads_back(tmp_path: Path) -> None:
    path = stopped(tmp_path, STOPS)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["target"]["stops_early"] is True
    assert check_stream(path).header.properties.stops_early


def test_the_specs_worked_example_checks_as_it_says(tmp_path: Path) -> None:
    spec = (Path(__file__).resolve().parents[2] / "spec" / "eventlog.md").read_text()
    section = spec[spec.index("### 4.9 Early stops") :]
    start = section.index("```json\n") + len("```json\n")
    example = section[start : section.index("\n```", start)]
    path = tmp_path / "example.jsonl"
    path.write_text(example + "\n")
    assert check_log(path) is None
    undeclared = tmp_path / "undeclared.jsonl"
    undeclared.write_text(example.replace(',"stops_early":true', "") + "\n")
    finding = check_log(undeclared)
    assert finding is not None and (finding.invariant, finding.iteration) == ("REQ-2", 2)
    assert "'a' was finished in iteration 2 after 2 of its 3" in finding.message


def test_an_abort_of_the_queues_head_leaves_batch_3_unjudged(tmp_path: Path) -> None:
    # h waits at the head (7 tokens need 4 pages, 3 are free) and s, which would fit, waits
    # behind it; fcfs serves neither, and h is aborted after the schedule. The line's queue
    # shows s alone: read as the head, s would be BATCH-3.
    three = (Request("a", 0, 2, 2), Request("h", 0, 6, 1), Request("s", 0, 2, 1))
    workload = Workload("head", Limits(2, 2, 4), three)
    first = [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 2], ["token", "a"]]
    first += [["finish", "h"]]
    second = [["admit", "s"], ["alloc", "a", [2]], ["alloc", "s", [1]], ["decode", ["a"]]]
    second += [["compute", "s", 2], ["token", "s"], ["finish", "a"], ["finish", "s"]]
    second += [["free", "a", [0, 2]], ["free", "s", [1]]]
    rows = [iteration(1, first, 3, waiting=["s"]), iteration(2, second, 4)]
    path = write(tmp_path / "head.jsonl", header(workload, STOPS), *rows)
    assert check_log(path) is None
    assert_same(path)
    figures = check_stream(path).efficiency
    assert figures is not None and figures.idle_slot_iterations == 0  # nor counted idle (EFF-1)
