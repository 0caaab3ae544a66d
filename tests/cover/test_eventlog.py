"""JSONL event logs (spec/eventlog.md): round trips, the schema and the reader agree, malformed
logs are rejected with their line and field, and the recorded logs in tests/logs/ keep their
verdicts."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import pytest
from engines import nano_like, vllm_like
from engines.recorded_logs import NANO, SCENARIOS, VLLM, VLLM_PREFIXES
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from kvsched.checks.eventlog.jsonl import (
    EventLogError,
    check_log,
    log_lines,
    read_log,
    read_run,
    write_log,
)
from kvsched.reference import ContinuousScheduler, StaticScheduler, run
from kvsched.reference.engine import Run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Limits, Request, Workload

SCHEMAS = Path(__file__).resolve().parents[2] / "spec" / "schemas"
W = Workload("w", Limits(2, 4, 8), (Request("a", 0, 5, 3), Request("b", 0, 2, 4)))


def validator() -> jsonschema.Draft202012Validator:
    documents = [
        json.loads((SCHEMAS / f"{n}.schema.json").read_text())
        for n in ("eventlog", "workload", "target")
    ]
    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], DRAFT202012.create_resource(doc)) for doc in documents
    )
    return jsonschema.Draft202012Validator(documents[0], registry=registry)


class RaisesInIteration2(ContinuousScheduler):
    calls = 0

    def schedule(self) -> ScheduledBatch:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("boom")
        return super().schedule()


RUNS: dict[str, Callable[[], tuple[Run, TargetProperties | None]]] = {
    "continuous": lambda: (run(W, ContinuousScheduler), None),
    "static": lambda: (run(W, StaticScheduler), TargetProperties()),
    "fault": lambda: (run(W, RaisesInIteration2), None),
    "vllm": lambda: (vllm_like.simulate(VLLM, 8, VLLM_PREFIXES), vllm_like.properties(8)),
    "nano": lambda: (nano_like.simulate(NANO, 24), nano_like.properties(24)),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_log_reads_back_as_the_run_it_records(name: str, tmp_path: Path) -> None:
    recorded, properties = RUNS[name]()
    path = tmp_path / "run.jsonl"
    write_log(recorded, path, properties)
    back, declared = read_run(path)
    assert back == recorded
    expected = properties or TargetProperties()
    assert declared == (expected if expected.policy else replace(expected, policy=recorded.policy))
    workload, declared_again, events = read_log(path)
    assert (workload, declared_again, events) == (recorded.workload, declared, recorded.events)
    for line in path.read_text().splitlines():
        validator().validate(json.loads(line))


def test_any_mapping_writes_as_an_object(tmp_path: Path) -> None:
    recorded = run(W, ContinuousScheduler)
    frozen = tuple(
        replace(e, page_tables=MappingProxyType(dict(e.page_tables))) for e in recorded.events
    )
    path = tmp_path / "proxy.jsonl"
    write_log(replace(recorded, events=frozen), path)
    assert read_run(path)[0] == recorded


def test_a_fault_line_is_proto_1(tmp_path: Path) -> None:
    path = tmp_path / "fault.jsonl"
    write_log(run(W, RaisesInIteration2), path)
    finding = check_log(path)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PROTO-1", 2)
    assert "boom" in finding.message


def lines_of(name: str) -> list[dict[str, Any]]:
    recorded, properties = RUNS[name]()
    return [json.loads(line) for line in log_lines(recorded, properties)]


def without(document: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != field}


# (line index, corruption, the field the reader must name); each breaks the schema too.
CORRUPTIONS: list[tuple[int, Callable[[dict[str, Any]], Any], str]] = [
    (0, lambda d: {**d, "version": 3}, "version"),
    (0, lambda d: {**d, "version": True}, "version"),
    (0, lambda d: without(d, "version"), "version"),
    (0, lambda d: {**d, "format": "other"}, "format"),
    (0, lambda d: without(d, "target"), "target"),
    (0, lambda d: {**d, "extra": 1}, "extra"),
    (0, lambda d: {**d, "target": without(d["target"], "policy")}, "policy"),
    (0, lambda d: {**d, "target": {**d["target"], "admission": "eager"}}, "admission"),
    (0, lambda d: {**d, "target": {**d["target"], "chunked_prefill": True, "token_budget": None}},
     "chunked_prefill"),
    (0, lambda d: {**d, "target": {**d["target"], "max_model_len": 4}}, "max_model_len"),
    (0, lambda d: {**d, "target": {**d["target"], "reserved_pages": [1, 1]}}, "reserved_pages"),
    (0, lambda d: {**d, "workload": without(d["workload"], "limits")}, "limits"),
    (0, lambda d: {**d, "workload": {**d["workload"], "format": 2}}, "format"),
    (1, lambda d: without(d, "free_pages"), "free_pages"),
    (1, lambda d: {**d, "free_pages": -1}, "free_pages"),
    (1, lambda d: {**d, "free_pages": True}, "free_pages"),
    (1, lambda d: {**d, "iteration": 0}, "iteration"),
    (1, lambda d: {**d, "decoded": "a"}, "decoded"),
    (1, lambda d: {**d, "admitted": [""]}, "admitted"),
    (1, lambda d: {**d, "page_tables": {"a": [0, "1"]}}, "page_tables"),
    (1, lambda d: {**d, "page_tables": {"": [0]}}, "page_tables"),
    (1, lambda d: {**d, "allocated": {"a": 0}}, "allocated"),
    (1, lambda d: {**d, "freed": []}, "freed"),
    (1, lambda d: {**d, "computed": {"a": -2}}, "computed"),
    (1, lambda d: {**d, "preempted": [3]}, "preempted"),
    (1, lambda d: {**d, "colour": "red"}, "colour"),
    (1, lambda d: {**d, "type": "iter"}, "type"),
    (1, lambda d: [d], "JSON object"),
]  # fmt: skip


FAULT_CORRUPTIONS: list[tuple[int, Callable[[dict[str, Any]], Any], str]] = [
    (-1, lambda d: without(d, "message"), "message"),
    (-1, lambda d: {**d, "call": 3}, "call"),
    (-1, lambda d: {**d, "iteration": -1}, "iteration"),
]


@pytest.mark.parametrize(("index", "corrupt", "field"), CORRUPTIONS + FAULT_CORRUPTIONS)
def test_schema_and_reader_reject_the_same_lines(
    index: int, corrupt: Callable[[dict[str, Any]], Any], field: str, tmp_path: Path
) -> None:
    lines = lines_of("continuous" if index >= 0 else "fault")
    index %= len(lines)
    lines[index] = corrupt(copy.deepcopy(lines[index]))
    assert not validator().is_valid(lines[index])
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(EventLogError) as error:
        read_run(path)
    assert f"bad.jsonl: line {index + 1}" in str(error.value)
    assert field in str(error.value)


def _with_target(tmp_path: Path, **declared: Any) -> Path:
    """The continuous run's log, its header declaring ``declared`` beside its own (valid by the
    schema, which knows no pool)."""
    lines = lines_of("continuous")
    lines[0] = {**lines[0], "target": {**lines[0]["target"], **declared}}
    assert validator().is_valid(lines[0])
    path = tmp_path / "declared.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_declarations_the_pool_cannot_hold_are_invalid(tmp_path: Path) -> None:
    """A reserved page past the pool, or a watermark of every page the pool hands out, which
    would excuse every idle iteration (BATCH-3, LIVE-2); a large watermark that fits is read."""
    pool = lines_of("continuous")[0]["workload"]["limits"]["pool_pages"]
    for declared, field in (
        ({"reserved_pages": [10**6]}, "reserved page 1000000 lies outside the pool"),
        ({"watermark_pages": 10**20}, "'target.watermark_pages'"),
        ({"reserved_pages": [0], "watermark_pages": pool - 1}, "'target.watermark_pages'"),
    ):
        with pytest.raises(EventLogError, match=r"declared\.jsonl: line 1") as error:
            read_run(_with_target(tmp_path, **declared))
        assert field in str(error.value)
    read_run(_with_target(tmp_path, reserved_pages=[0], watermark_pages=pool - 2))


def test_schema_and_reader_accept_the_same_variants(tmp_path: Path) -> None:
    lines = lines_of("vllm")
    lines[0]["target"] = {"policy": "continuous", "token_budget": None, "prefix_sharing": False}
    lines[0]["target"].update(chunked_prefill=True, token_budget=8, preemption=True)
    lines[1]["cached"], lines[1]["shared"], lines[1]["preempted"] = {}, {}, []
    for line in lines:
        validator().validate(line)
    path = tmp_path / "variant.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    recorded, properties = read_run(path)
    assert properties.reserved_pages == () and properties.chunked_prefill
    assert len(recorded.events) == len(lines) - 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: ls[1:], "line 1 (header): field 'type' must be 'header'"),
        (lambda ls: [ls[0], ls[2]], "line 2: field 'iteration' must be 1"),
        (lambda ls: [*ls, ls[-1]], "field 'iteration' must be"),
        (lambda ls: [ls[0], without(ls[1], "computed"), *ls[2:]], "line 2: field 'computed'"),
        (lambda ls: [*ls, {"type": "fault", "iteration": 3, "call": "x", "message": "y"}, ls[1]],
         "nothing may follow the fault line"),
        (lambda ls: [], "empty"),
    ],
)  # fmt: skip
def test_reader_checks_what_spans_lines(
    edit: Callable[[Any], Any], message: str, tmp_path: Path
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in edit(lines_of("vllm"))))
    with pytest.raises(EventLogError, match=re.escape(message)):
        read_run(path)


def test_unreadable_and_non_json_logs_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(EventLogError, match="cannot read"):
        read_run(tmp_path / "missing.jsonl")
    path = tmp_path / "broken.jsonl"
    path.write_text('{"type": "header",\n')
    with pytest.raises(EventLogError, match=re.escape("line 1 (header): not valid JSON")):
        read_run(path)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_recorded_logs_are_current_and_keep_their_verdict(scenario: Any) -> None:
    assert scenario.path.read_text().splitlines() == list(scenario.lines()), (
        "stale log: regenerate with PYTHONPATH=tests python -m engines.recorded_logs"
    )
    finding = check_log(scenario.path)
    assert (finding.invariant if finding else None) == scenario.expected
    if finding is not None:
        assert finding.recent and finding.recent[-1].iteration == finding.iteration


def test_a_log_is_checked_without_importing_its_engine() -> None:
    log = next(s.path for s in SCENARIOS if s.expected == "PAGE-2")
    code = (
        "import sys; from kvsched.checks.eventlog.jsonl import check_log; "
        f"f = check_log({str(log)!r}); "
        "assert not [m for m in sys.modules if m.startswith('engines')]; print(f.invariant)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "PAGE-2"


def test_a_gzipped_log_is_checked_through_the_command_line(tmp_path: Path) -> None:
    """``kvsched check run.jsonl.gz`` takes the event-log path, never the host's."""
    import gzip

    from kvsched.checks.eventlog.jsonl import write_log
    from kvsched.cli import main
    from kvsched.reference import POLICIES, run
    from kvsched.spec.teaching import load_teaching_trace

    plain = tmp_path / "run.jsonl"
    write_log(run(load_teaching_trace(), POLICIES["continuous"]), plain)
    packed = tmp_path / "run.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert main(["check", str(packed), "--save-dir", str(tmp_path / "saved")]) == 0
