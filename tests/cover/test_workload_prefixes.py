"""Optional request fields (spec/semantics.md, section 1.1): shared prefixes and priority."""

from __future__ import annotations

from typing import Any

import pytest

from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import WorkloadError, parse_workload, workload_to_json


def _doc(**fields: Any) -> dict[str, Any]:
    request = {"id": "a", "arrival": 0, "prompt_tokens": 10, "output_tokens": 2, **fields}
    return {
        "format": 1,
        "limits": {"batch_limit": 2, "page_size": 4, "pool_pages": 8},
        "requests": [request, {"id": "b", "arrival": 0, "prompt_tokens": 6, "output_tokens": 1}],
    }


def test_prefix_fields_round_trip_and_lesson_files_are_unchanged() -> None:
    workload = parse_workload(_doc(prefix_group="sys", prefix_tokens=8, priority=-1))
    a, b = workload.requests
    assert (a.prefix_group, a.prefix_tokens, a.priority) == ("sys", 8, -1)
    assert (b.prefix_group, b.prefix_tokens, b.priority) == ("", 0, 0)
    assert parse_workload(workload_to_json(workload)) == workload
    assert "prefix_group" not in workload_to_json(workload)["requests"][1]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"prefix_group": "sys"}, "go together"),
        ({"prefix_tokens": 3}, "go together"),
        ({"prefix_group": "", "prefix_tokens": 3}, "non-empty string"),
        ({"prefix_group": "sys", "prefix_tokens": 11}, "within 0..10"),
        ({"prefix_group": "sys", "prefix_tokens": True}, "must be an integer"),
        ({"priority": 1.5}, "'priority' must be an integer"),
    ],
)
def test_malformed_prefix_fields_are_named(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError, match=message) as caught:
        parse_workload(_doc(**fields), source="w.json")
    assert "w.json: request #0 ('a')" in str(caught.value)


def test_the_shared_prefix_family_groups_requests_without_changing_other_families() -> None:
    grouped = generate("shared-prefix", 50, 1)
    groups = {r.prefix_group for r in grouped.requests}
    assert len(groups) > 1 and all(r.prefix_tokens <= r.prompt_tokens for r in grouped.requests)
    assert any(r.prefix_tokens > grouped.limits.page_size for r in grouped.requests)
    plain = generate(next(iter(FAMILIES)), 20, 1)
    assert all(not r.prefix_group for r in plain.requests)
