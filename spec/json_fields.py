"""Checked reading of JSON fields for spec's loaders: what is wrong, named, as a WorkloadError.

:mod:`.workload` reads a workload's fields with these, :mod:`.request_fields` a request's
optional ones; each error message names the file, the request and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .strict_json import is_text, json_kind
from .strict_json import shown_value as shown


class WorkloadError(ValueError):
    """A workload is malformed. The message names the file, the request and the field."""


def integer(value: Any, bounds: tuple[int, int], where: str, field: str) -> int:
    """``value``, the field ``field`` of what ``where`` names, if it is an integer within
    ``bounds``; the text of an error is made only for a value that is wrong."""
    # bool is an int subclass in Python, but true/false is never a length in a workload file.
    if type(value) is int and bounds[0] <= value <= bounds[1]:
        return value
    where = f"{where}: field '{field}'"
    if type(value) is not int:
        raise WorkloadError(f"{where} must be an integer, got {json_kind(value)} {shown(value)}")
    minimum, maximum = bounds
    if value < minimum:
        raise WorkloadError(f"{where} must be >= {minimum}, got {shown(value)}")
    if value > maximum:
        raise WorkloadError(
            f"{where} must be <= {maximum} (the bound of schemas/workload.schema.json), got "
            f"{shown(value)}"
        )
    return value


def text(value: Any, source: str, field: str) -> str:
    if not is_text(value):
        raise WorkloadError(
            f"{source}: field '{field}' must be a string of UTF-8 text, got {json_kind(value)} "
            f"{shown(value)}"
        )
    return str(value)


def reject_unknown(raw: Mapping[str, Any], known: set[str], where: str, what: str) -> None:
    if raw.keys() <= known:  # the usual case, tested in C: no set made, nothing sorted
        return
    unknown = min(set(raw) - known)
    raise WorkloadError(
        f"{where}: unknown field '{unknown}' in {what} (known fields: {', '.join(sorted(known))})"
    )
