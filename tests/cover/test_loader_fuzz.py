"""Fuzzing both loaders: whatever the bytes, a loaded value or a clean error, never a traceback.

Hypothesis feeds the workload loader and the event-log reader arbitrary bytes, and valid files
mutated byte by byte and value by value (a number swapped for 1.0, true, 10**100, a nested
array, a lone surrogate, a repeated key). Each loader must either load the input or raise its
own error (WorkloadError, EventLogError); anything else is a bug of ours. A workload it accepts
must also be exactly what the file says: written back, it gives the same JSON document with the
same types, so ``"format": 1.0`` or ``"arrival": true`` cannot slip through as 1.

The ``ci`` profile (the default) runs each test for a bounded number of examples; run
``pytest --hypothesis-profile=thorough tests/cover/test_loader_fuzz.py`` to fuzz for longer.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsched.checks.eventlog.jsonl import EventLogError, check_log
from kvsched.spec.strict_json import decode_json
from kvsched.spec.workload import WorkloadError, load_workload, parse_workload, workload_to_json

ROOT = Path(__file__).resolve().parents[2]
VALID_WORKLOAD = (ROOT / "spec" / "traces" / "teaching.json").read_bytes()
VALID_LOGS = [path.read_bytes() for path in sorted((ROOT / "tests" / "logs").glob("*.jsonl"))]

ODD_NUMBERS = [1.0, True, False, None, 10**100, -(10**100), 2**63, 2**64, 10**7, -1, 0]
ODD_VALUES = st.sampled_from([*ODD_NUMBERS, float("inf"), "1", "\ud800", [], {}, [[[[1]]]]])

FUZZ = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)


def _workload(data: bytes) -> None:
    """Load ``data`` as a workload file: a Workload, or WorkloadError."""
    try:
        document = decode_json(data, "fuzz.json", WorkloadError)
        workload = parse_workload(document, source="fuzz.json")
    except WorkloadError as error:
        str(error).encode("utf-8")  # the message itself must be printable
        return
    written = workload_to_json(workload)
    expected = {"name": "fuzz", "description": "", **document}
    assert _same(written, expected), (document, written)


def _log(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.jsonl"
        path.write_bytes(data)
        try:
            check_log(path)  # read, then judged by the monitor: neither may raise anything else
        except EventLogError as error:
            str(error).encode("utf-8")


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON documents, types and all (1 is not 1.0, nor true)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@st.composite
def mutated_bytes(draw: st.DrawFn, sources: list[bytes]) -> bytes:
    """A valid file with a few bytes replaced, inserted or deleted."""
    data = bytearray(draw(st.sampled_from(sources)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["replace", "insert", "delete"]))
        chunk = draw(st.binary(min_size=1, max_size=4))
        if action == "replace":
            data[at : at + len(chunk)] = chunk
        elif action == "insert":
            data[at:at] = chunk
        else:
            del data[at : at + len(chunk)]
    return bytes(data)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document[:4]):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated_document(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one value swapped for an odd one, or one key repeated."""
    document = json.loads(json.dumps(document))
    path = draw(st.sampled_from(_paths(document)))
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = draw(ODD_VALUES)
    return document


def _dump(document: Any, repeat_key: bool) -> bytes:
    text = json.dumps(document)
    if repeat_key and text.startswith("{"):
        text = '{"format": 2, ' + text[1:]  # the same key twice in one object
    return text.encode("utf-8", "surrogatepass")


@FUZZ
@given(st.binary(max_size=300))
def test_workload_loader_on_any_bytes(data: bytes) -> None:
    _workload(data)


@FUZZ
@given(mutated_bytes([VALID_WORKLOAD]))
def test_workload_loader_on_mutated_files(data: bytes) -> None:
    _workload(data)


@FUZZ
@given(mutated_document(json.loads(VALID_WORKLOAD)), st.booleans())
def test_workload_loader_on_odd_values(document: Any, repeat_key: bool) -> None:
    _workload(_dump(document, repeat_key))


@FUZZ
@given(st.binary(max_size=300))
def test_event_log_reader_on_any_bytes(data: bytes) -> None:
    _log(data)


@FUZZ
@given(mutated_bytes(VALID_LOGS))
def test_event_log_reader_on_mutated_files(data: bytes) -> None:
    _log(data)


@FUZZ
@given(st.sampled_from(VALID_LOGS), st.data())
def test_event_log_reader_on_odd_values(log: bytes, data: st.DataObject) -> None:
    lines = log.decode("utf-8").splitlines()
    number = data.draw(st.integers(0, min(len(lines), 4) - 1))
    lines[number] = _dump(data.draw(mutated_document(json.loads(lines[number]))), False).decode(
        "utf-8", "surrogatepass"
    )
    _log("\n".join(lines).encode("utf-8", "surrogatepass"))


def test_the_issues_inputs_are_clean_errors(tmp_path: Path) -> None:
    document = json.loads(VALID_WORKLOAD)
    cases = {
        b"\xff\xfe{}": "not UTF-8 text",
        b"[" * 100_000: "nested too deeply",
        b'{"format": 1, "format": 1}': "appears twice",
    }
    for change, words in (
        (("format",), 1.0),
        (("format",), True),
        (("limits", "pool_pages"), 2**63),
        (("requests", 0, "arrival"), 10**100),
        (("requests", 0, "id"), "\ud800"),
    ):
        bad = json.loads(json.dumps(document))
        bad[change[0]] = bad[change[0]] if len(change) > 1 else words
        target = bad
        for step in change[:-1]:
            target = target[step]
        target[change[-1]] = words
        cases[_dump(bad, False)] = {
            "format": "must be 1",
            "pool_pages": "must be <= 1048576",
            "arrival": "must be <= 100000",
            "id": "lone surrogate",
        }[str(change[-1])]
    for data, words in cases.items():
        path = tmp_path / "w.json"
        path.write_bytes(data)
        try:
            load_workload(path)
        except WorkloadError as error:
            assert words in str(error), (data[:80], error)
        else:
            raise AssertionError(f"accepted {data[:80]!r}")


def test_the_issues_logs_are_clean_errors(tmp_path: Path) -> None:
    lines = VALID_LOGS[0].decode("utf-8").splitlines()
    header, first = json.loads(lines[0]), json.loads(lines[1])
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({**header, "format": 1.0}, first, "field 'format' must be"),
        ({**header, "version": True}, first, "field 'version' must be"),
        ({**header, "target": {**header["target"], "reserved_pages": [10**6]}}, first, "outside"),
        (header, {**first, "arrived": ["ghost"]}, "not a request of the header's workload"),
        (header, {**first, "waiting": ["\ud800"]}, "lone surrogate"),
        (header, {**first, "admitted": ["\ud800"]}, "lone surrogate"),
    ]
    for changed_header, changed_first, words in cases:
        path = tmp_path / "log.jsonl"
        text = "\n".join([json.dumps(changed_header), json.dumps(changed_first), *lines[2:]])
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            check_log(path)
        except EventLogError as error:
            assert words in str(error), (words, error)
        else:
            raise AssertionError(f"accepted a log with {words}")
