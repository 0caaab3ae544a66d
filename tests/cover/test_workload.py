"""The workload loader and its JSON Schema agree, and bad files are named precisely (section 1)."""

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kvsched.spec import teaching
from kvsched.spec.workload import (
    WorkloadError,
    load_workload,
    parse_workload,
    workload_to_json,
)

SCHEMA = json.loads(
    (Path(teaching.__file__).parent / "schemas" / "workload.schema.json").read_text()
)

GOOD: dict[str, Any] = {
    "format": 1,
    "name": "tiny",
    "limits": {"batch_limit": 2, "page_size": 4, "pool_pages": 8},
    "requests": [
        {"id": "r1", "arrival": 0, "prompt_tokens": 3, "output_tokens": 2},
        {"id": "r2", "arrival": 1, "prompt_tokens": 0, "output_tokens": 1},
    ],
}


def mutate(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    document = copy.deepcopy(GOOD)
    target: Any = document
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


DELETE = object()

# (change, words the error must contain; also rejected by the schema unless marked)
BAD = [
    ((("limits",), DELETE), ["missing field 'limits'"]),
    ((("requests", 0, "output_tokens"), DELETE), ["request #0 ('r1')", "'output_tokens'"]),
    ((("requests", 1, "colour"), "red"), ["request #1 ('r2')", "unknown field 'colour'"]),
    ((("requests", 0, "prompt_tokens"), -1), ["'prompt_tokens'", ">= 0", "-1"]),
    ((("requests", 0, "prompt_tokens"), 2.5), ["'prompt_tokens'", "integer", "2.5"]),
    ((("requests", 0, "arrival"), "0"), ["'arrival'", "integer"]),
    ((("requests", 0, "output_tokens"), 0), ["'output_tokens'", ">= 1"]),
    ((("requests", 0, "output_tokens"), True), ["'output_tokens'", "boolean"]),
    ((("requests", 1, "id"), ""), ["'id'", "non-empty string"]),
    ((("limits", "page_size"), 0), ["limits", "'page_size'", ">= 1"]),
    ((("limits", "batch_limit"), None), ["'batch_limit'", "null"]),
    ((("limits", "spare"), 1), ["unknown field 'spare'"]),
    ((("format",), 2), ["'format'", "must be 1"]),
    ((("requests",), []), ["'requests' is empty"]),
    ((("requests",), {}), ["'requests'", "array"]),
]


@pytest.mark.parametrize(("change", "words"), BAD)
def test_malformed_workloads_are_rejected_by_loader_and_schema(
    change: tuple[tuple[Any, ...], Any], words: list[str]
) -> None:
    document = mutate(*change)
    with pytest.raises(WorkloadError) as raised:
        parse_workload(document, source="w.json")
    message = str(raised.value)
    assert message.startswith("w.json: ")
    for word in words:
        assert word in message
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_duplicate_ids_and_oversized_requests_are_rejected_beyond_the_schema() -> None:
    duplicate = mutate(("requests", 1, "id"), "r1")
    jsonschema.validate(duplicate, SCHEMA)  # a JSON Schema cannot say "unique by field"
    with pytest.raises(WorkloadError, match=r"request #1 \('r1'\): duplicate request id 'r1'"):
        parse_workload(duplicate, source="w.json")
    too_big = mutate(("requests", 0, "prompt_tokens"), 40)
    with pytest.raises(
        WorkloadError, match=r"request #0 \('r1'\): needs 11 pages.*pool_pages is 8"
    ):
        parse_workload(too_big, source="w.json")


def test_good_workloads_pass_both_and_round_trip() -> None:
    jsonschema.validate(GOOD, SCHEMA)
    workload = parse_workload(GOOD)
    assert parse_workload(workload_to_json(workload)) == workload
    trace = teaching.load_teaching_trace()
    jsonschema.validate(workload_to_json(trace), SCHEMA)
    assert parse_workload(workload_to_json(trace)) == trace


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"missing\.json: cannot read"):
        load_workload(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": 1,\n "limits": }')
    with pytest.raises(WorkloadError, match=r"broken.json: not valid JSON \(line 2"):
        load_workload(broken)
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    with pytest.raises(WorkloadError, match="must be a JSON object, got array"):
        load_workload(not_object)
