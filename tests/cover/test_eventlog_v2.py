"""Event logs of version 2 (spec/eventlog.md, section 5): operations in order, page deltas,
count-only allocators, gzip, and the same verdicts as version 1 on every recorded run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from engines.recorded_logs import SCENARIOS

from kvsched.checks.eventlog.header import parse_header
from kvsched.checks.eventlog.jsonl import EventLogError, check_log, read_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.cli import main
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.workload import Limits, Request, Workload, workload_to_json

W = Workload("two", Limits(2, 2, 6), (Request("a", 0, 2, 2), Request("b", 0, 2, 2)))
LAZY = TargetProperties("continuous", admission="lazy", token_budget=8, preemption=True)

FIRST = [
    ["admit", "a"], ["alloc", "a", [0]], ["admit", "b"], ["alloc", "b", [1]],
    ["compute", "a", 2], ["compute", "b", 2], ["token", "a"], ["token", "b"],
]  # fmt: skip
# b is preempted, admitted again at once, recomputes its prompt and token, and finishes: all in
# iteration 2, as vidur's Sarathi scheduler may do. Version 1 cannot say it: its one 'freed'
# list per request would mix the preemption's frees with the finish's.
SECOND = [
    ["preempt", "b"], ["free", "b", [1]], ["admit", "b"], ["alloc", "b", [1, 2]],
    ["alloc", "a", [3]], ["compute", "b", 3], ["decode", ["a"]], ["token", "b"],
    ["finish", "a"], ["finish", "b"], ["free", "a", [0, 3]], ["free", "b", [1, 2]],
]  # fmt: skip


def header(workload: Workload = W, target: TargetProperties = LAZY, **extra: Any) -> dict[str, Any]:
    return {
        "type": "header",
        "format": "kvsched-eventlog",
        "version": 2,
        "workload": workload_to_json(workload),
        "target": properties_to_json(target),
        **extra,
    }


def iteration(n: int, ops: list[Any], free: int, **extra: Any) -> dict[str, Any]:
    return {"type": "iteration", "iteration": n, "ops": ops, "free_pages": free, **extra}


def write(path: Path, *lines: Any) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_preempt_readmit_and_finish_in_one_iteration_check_clean(tmp_path: Path) -> None:
    log = write(tmp_path / "l.jsonl", header(), iteration(1, FIRST, 4), iteration(2, SECOND, 6))
    assert check_log(log) is None
    run, _ = read_run(log)
    second = run.events[1]
    assert (second.preempted, second.admitted, second.finished) == (("b",), ("b",), ("a", "b"))
    assert second.page_tables == {"a": (0, 3), "b": (1, 2)}
    assert run.drained


def test_a_readmitted_request_that_kept_a_page_is_page_4(tmp_path: Path) -> None:
    kept = [op for op in SECOND if op[:2] != ["free", "b"] or op[2] != [1]]
    kept[kept.index(["alloc", "b", [1, 2]])] = ["alloc", "b", [2]]
    log = write(tmp_path / "l.jsonl", header(), iteration(1, FIRST, 4), iteration(2, kept, 6))
    finding = check_log(log)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PAGE-4", 2)


def test_a_page_freed_by_a_later_preemption_was_still_held(tmp_path: Path) -> None:
    # a takes page 1 before b, preempted after, gives it back: order makes it a second owner.
    order = [
        ["alloc", "a", [1]], ["preempt", "b"], ["free", "b", [1]], ["decode", ["a"]],
        ["finish", "a"], ["free", "a", [0, 1]],
    ]  # fmt: skip
    log = write(tmp_path / "l.jsonl", header(), iteration(1, FIRST, 4), iteration(2, order, 6))
    finding = check_log(log)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PAGE-2", 2)


def counts(ops: list[Any]) -> list[Any]:
    return [[*op[:2], len(op[2])] if op[0] in ("alloc", "free") else op for op in ops]


def test_a_count_only_allocator_checks_clean(tmp_path: Path) -> None:
    log = write(
        tmp_path / "c.jsonl",
        header(pages="counts"),
        iteration(1, counts(FIRST), 4),
        iteration(2, counts(SECOND), 6),
    )
    assert check_log(log) is None


@pytest.mark.parametrize(
    ("edit", "invariant"),
    [
        (lambda ops: [op for op in ops if op != ["free", "a", 2]], "PAGE-4"),  # a leak
        (lambda ops: [["free", "a", 3] if op == ["free", "a", 2] else op for op in ops], "PAGE-3"),
        (lambda ops: [["alloc", "a", 2] if op == ["alloc", "a", 1] else op for op in ops],
         "PAGE-1"),
    ],
)  # fmt: skip
def test_a_count_only_allocator_still_shows_count_bugs(
    edit: Any, invariant: str, tmp_path: Path
) -> None:
    log = write(
        tmp_path / "c.jsonl",
        header(pages="counts"),
        iteration(1, counts(FIRST), 4),
        iteration(2, edit(counts(SECOND)), 6),
    )
    finding = check_log(log)
    assert finding is not None and finding.invariant == invariant


def test_a_count_only_pool_cannot_overflow(tmp_path: Path) -> None:
    tight = Workload("tight", Limits(2, 2, 2), W.requests)
    ops = [["admit", "a"], ["alloc", "a", 3], ["compute", "a", 2], ["token", "a"]]
    log = write(tmp_path / "c.jsonl", header(tight, pages="counts"), iteration(1, ops, 0))
    finding = check_log(log)
    assert finding is not None and finding.invariant == "PAGE-5"


def test_a_decode_adds_to_what_the_line_computes_for_the_request(tmp_path: Path) -> None:
    # a computes 2 tokens and decodes one more: KV for 5 tokens of the 4 it has (DEC-1), read
    # from the sum of both operations, whichever comes first.
    for step in (
        [["compute", "a", 2], ["decode", ["a"]]],
        [["decode", ["a"]], ["compute", "a", 2]],
    ):
        second = [["alloc", "a", [2, 3]], *step]
        log = write(tmp_path / "d.jsonl", header(), iteration(1, FIRST, 4), iteration(2, second, 2))
        finding = check_log(log)
        assert finding is not None and (finding.invariant, finding.requests) == ("DEC-1", ("a",))
        assert "KV for 5 tokens" in finding.message, finding.message


def test_a_gzip_log_reads_like_a_plain_one(tmp_path: Path) -> None:
    plain = write(tmp_path / "l.jsonl", header(), iteration(1, FIRST, 4), iteration(2, SECOND, 6))
    packed = tmp_path / "l.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_run(packed) == read_run(plain)
    packed.write_bytes(gzip.compress(plain.read_bytes())[:-12])
    assert_rejected(packed, "gzip")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_version_2_keeps_every_recorded_verdict(scenario: Any, tmp_path: Path) -> None:
    run, properties = read_run(scenario.path)
    log = tmp_path / "v2.jsonl"
    log.write_text("".join(line + "\n" for line in v2_lines(run, properties)))
    finding, again = check_log(scenario.path), check_log(log)
    assert (again and (again.invariant, again.iteration)) == (
        finding and (finding.invariant, finding.iteration)
    )
    assert read_run(log)[0].drained == run.drained


def assert_rejected(path: Path, *words: str) -> None:
    with pytest.raises(EventLogError) as error:
        read_run(path)
    for word in words:
        assert word in str(error.value), str(error.value)


def lines(*rows: Any) -> list[str]:
    return [json.dumps(row) for row in rows]


@pytest.mark.parametrize(
    ("second", "words"),
    [
        ('{"type":"iteration","iteration":1,"iteration":1,"ops":[],"free_pages":6}',
         ("line 2", "'iteration' appears twice")),
        ('{"type":"iteration","iteration":1,"ops":[["admit","\udcff"]],"free_pages":6}',
         ("line 2", "UTF-8")),
        ('{"type":"iteration","iteration":1,"ops":' + "[" * 5000 + "]" * 5000 + ',"free_pages":6}',
         ("line 2",)),
        ('{"type":"iteration","iteration":1.0,"ops":[],"free_pages":6}', ("line 2", "iteration")),
        ('{"type":"iteration","iteration":1,"ops":[["admit",""]],"free_pages":6}',
         ("line 2", "ops[0]")),
        ('{"type":"iteration","iteration":1,"ops":[["grow","a"]],"free_pages":6}',
         ("line 2", "ops[0]")),
        ('{"type":"iteration","iteration":1,"ops":[["alloc","a",2]],"free_pages":6}',
         ("line 2", "ops[0]", "count")),
        ('{"type":"iteration","iteration":1,"ops":[["token","a"],["admit","a"]],"free_pages":6}',
         ("line 2", "ops[1]", "after the step")),
        ('{"type":"iteration","iteration":1,"ops":[],"free_pages":6,"tables":{"a":[0]}}',
         ("line 2", "tables")),
        ('{"type":"iteration","iteration":1,"arrived":[],"free_pages":6}', ("line 2", "arrived")),
    ],
)  # fmt: skip
def test_malformed_version_2_lines_are_invalid_input(
    second: str, words: tuple[str, ...], tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    text = json.dumps(header()) + "\n" + second + "\n"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    assert_rejected(path, *words)


@pytest.mark.parametrize("version", ["1.0", "true", '"2"', "3"])
def test_a_version_is_the_integer_1_or_2(version: str, tmp_path: Path) -> None:
    text = json.dumps(header()).replace('"version": 2', f'"version": {version}')
    path = tmp_path / "v.jsonl"
    path.write_text(text + "\n")
    assert_rejected(path, "line 1 (header)", "version")


def test_a_header_may_not_repeat_a_key(tmp_path: Path) -> None:
    text = json.dumps(header()).replace('"version": 2', '"version": 2, "version": 2')
    path = tmp_path / "v.jsonl"
    path.write_text(text + "\n")
    assert_rejected(path, "line 1 (header)", "'version' appears twice")


@pytest.mark.parametrize(("comma", "colon"), [(",", ":"), (", ", ": "), (",", " :")])
def test_a_key_repeated_in_a_request_of_the_header_is_found(
    comma: str, colon: str, tmp_path: Path
) -> None:
    text = json.dumps(header(), separators=(comma, colon))
    key = f'"prompt_tokens"{colon}'
    path = tmp_path / "v.jsonl"
    path.write_text(text.replace(key, f"{key}1{comma}{key}", 1) + "\n")
    assert_rejected(path, "line 1 (header)", "'prompt_tokens' appears twice")


def test_a_header_reads_the_same_by_msgspec_and_by_json(tmp_path: Path) -> None:
    # Compact text is read by msgspec first; a \u escape sends the line to json.
    document = header()
    document["workload"]["description"] = "caf\u00e9"
    compact, escaped = tmp_path / "compact.jsonl", tmp_path / "escaped.jsonl"
    compact.write_text(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
    escaped.write_text(json.dumps(document) + "\n")
    assert "\\u00e9" in escaped.read_text()
    assert parse_header(compact.read_bytes().strip(), compact) == parse_header(
        escaped.read_bytes().strip(), escaped
    )


def test_all_findings_reports_a_second_later_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Iteration 1 miscounts the free pages (PAGE-3); iteration 2 decodes a without the page
    # its third token needs (PAGE-1), a different invariant, later.
    short = [op for op in SECOND if op != ["alloc", "a", [3]]]
    short[short.index(["free", "a", [0, 3]])] = ["free", "a", [0]]
    log = write(tmp_path / "l.jsonl", header(), iteration(1, FIRST, 5), iteration(2, short, 6))
    first = check_stream(log)
    assert first.finding is not None and (first.finding.invariant, first.later) == ("PAGE-3", ())
    every = check_stream(log, all_findings=True)
    assert every.finding == first.finding
    assert [(f.invariant, f.iteration) for f in every.later] == [("PAGE-1", 2)]
    assert main(["check", str(log), "--all-findings"]) == 1
    out = capsys.readouterr().out
    assert "also violated: PAGE-1 (iteration 2)" in out
    assert main(["check", str(log)]) == 1
    assert "also violated" not in capsys.readouterr().out


def test_the_schema_accepts_version_2_lines(tmp_path: Path) -> None:
    from test_eventlog import validator

    lines = [header(), iteration(1, FIRST, 4), iteration(2, SECOND, 6, waiting=[])]
    lines += [header(pages="counts"), iteration(1, counts(FIRST), 4)]
    for line in lines:
        validator().validate(line)
    bad = [iteration(1, [["alloc", "a"]], 4), iteration(1, [["grow", "a"]], 4)]
    bad += [{**header(), "version": 1, "pages": "ids"}, iteration(1, [["decode", "a"]], 4)]
    for line in bad:
        assert not validator().is_valid(line), line
