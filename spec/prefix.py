"""Shared prompt prefixes in a workload: a group name and how many prompt tokens it covers.

Requests of one group start their prompts with the same tokens (a system prompt, a few-shot
preamble), so an engine with prefix caching may share the KV of those tokens. The lesson's model
ignores prefixes; a recorder (checks/record/) makes the shared tokens real.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

PREFIX_FIELDS = ("prefix_group", "prefix_tokens")
"""Optional request fields of a workload file, given together or not at all."""
MAX_GROUP_LENGTH = 256


class _Prefixed(Protocol):
    @property
    def prefix_group(self) -> str: ...
    @property
    def prefix_tokens(self) -> int: ...


def parse_prefix(
    item: Mapping[str, Any], prompt_tokens: int, label: str, error: type[ValueError]
) -> dict[str, Any]:
    """The request's prefix fields, checked; ``{}`` if it has none. Raises ``error``."""
    given = [field for field in PREFIX_FIELDS if field in item]
    if not given:
        return {}
    if len(given) == 1:
        other = next(field for field in PREFIX_FIELDS if field not in given)
        raise error(f"{label}: field '{given[0]}' needs '{other}' (a group and a length)")
    group, length = item["prefix_group"], item["prefix_tokens"]
    if type(group) is not str or not 0 < len(group) <= MAX_GROUP_LENGTH or not group.isprintable():
        raise error(
            f"{label}: field 'prefix_group' must be a printable name of 1 to "
            f"{MAX_GROUP_LENGTH} characters"
        )
    if type(length) is not int or not 1 <= length <= prompt_tokens:
        raise error(
            f"{label}: field 'prefix_tokens' must be an integer from 1 to the prompt's "
            f"{prompt_tokens} tokens (a shared prefix is part of the prompt), got {length!r}"
        )
    return {"prefix_group": group, "prefix_tokens": length}


def prefix_json(request: _Prefixed) -> dict[str, Any]:
    """The prefix fields of a request's JSON, or none if it shares no prefix."""
    if not request.prefix_group:
        return {}
    return {"prefix_group": request.prefix_group, "prefix_tokens": request.prefix_tokens}
