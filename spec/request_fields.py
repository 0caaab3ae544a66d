"""A request's optional fields (spec/semantics.md, section 1.1): a shared prefix and a priority.

Kept apart from the workload loader (:mod:`.workload`), which calls :func:`parse_optional` for
each request and :func:`optional_json` when it writes one: the lesson's workloads set none of
them, and a workload that sets none is written exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .json_fields import WorkloadError

OPTIONAL_FIELDS = ("prefix_group", "prefix_tokens", "priority")


MAX_PRIORITY = 1_000_000


def parse_optional(item: Mapping[str, Any], prompt_tokens: int, label: str) -> dict[str, Any]:
    """The optional fields of a request document, checked; ``label`` names the request."""
    try:
        return _parse(item, prompt_tokens)
    except ValueError as error:
        raise WorkloadError(f"{label}: {error}") from None


def _parse(item: Mapping[str, Any], prompt_tokens: int) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "priority" in item:
        values["priority"] = _integer(item["priority"], "priority", -MAX_PRIORITY, MAX_PRIORITY)
    if "prefix_group" not in item and "prefix_tokens" not in item:
        return values
    if "prefix_group" not in item or "prefix_tokens" not in item:
        raise ValueError(
            "fields 'prefix_group' and 'prefix_tokens' go together: a shared prefix names its "
            "group and its length"
        )
    group = item["prefix_group"]
    if not isinstance(group, str) or not 0 < len(group) <= 256:
        raise ValueError(
            f"field 'prefix_group' must be a non-empty string of at most 256 characters, got "
            f"{group!r}"
        )
    length = _integer(item["prefix_tokens"], "prefix_tokens", 0, prompt_tokens)
    values.update(prefix_group=group, prefix_tokens=length)
    return values


def optional_json(prefix_group: str, prefix_tokens: int, priority: int) -> dict[str, Any]:
    """The optional fields a request document carries: only those set."""
    document: dict[str, Any] = {}
    if prefix_group:
        document.update(prefix_group=prefix_group, prefix_tokens=prefix_tokens)
    if priority:
        document["priority"] = priority
    return document


def _integer(value: Any, name: str, low: int, high: int) -> int:
    # bool is an int subclass, but true/false is never a length or a priority.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field '{name}' must be an integer, got {value!r}")
    if not low <= value <= high:
        why = " (a shared prefix is part of the prompt)" if name == "prefix_tokens" else ""
        raise ValueError(f"field '{name}' must be within {low}..{high}, got {value}{why}")
    return value
