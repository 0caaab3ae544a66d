"""The well-formedness of protocol version 2's fields (spec/semantics.md, section 4.1; PROTO-1).

The engine (:mod:`.engine`) checks the lesson's fields of a ``ScheduledBatch``; these are the
version-2 ones: token counts per request, pages taken by reference or released by preemption.
A batch that reports hits or preemptions without the tokens computed is not version 2 at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvsched.spec.protocol import ScheduledBatch


def malformed_version_2(batch: ScheduledBatch) -> str:
    """Why the version-2 fields of ``batch`` are malformed, or "" if they are well formed."""
    for name in ("shared", "preempt_freed"):
        problem = _malformed(f"ScheduledBatch.{name}", getattr(batch, name), _page_ids)
        if problem:
            return problem
    if batch.computed is None:
        if batch.cached or batch.shared or batch.preempted:
            return (
                "ScheduledBatch reports prefix-cache hits or preemptions but no 'computed' "
                "tokens: protocol version 2 needs the tokens each request computed"
            )
        return ""
    for name in ("computed", "cached"):
        problem = _malformed(f"ScheduledBatch.{name}", getattr(batch, name), _count)
        if problem:
            return problem
    return ""


def malformed_slots(where: str, slots: Any, free: Any = None) -> str:
    """Why a report of state slots (``ScheduledBatch.slots``, ``StepOutcome.slots`` with
    ``free_slots``) is malformed, or "" if it is well formed or absent (section 4.2)."""
    if slots is not None:
        problem = _malformed(f"{where}.slots", slots, _count)
        if problem:
            return problem.replace("an integer >= 0", "a slot id, an integer >= 0")
    if free is not None and not _count(free):
        return f"{where}.free_slots must be an integer >= 0, got {free!r}"
    return ""


def _malformed(where: str, values: Any, valid: Any) -> str:
    if not isinstance(values, Mapping):
        return f"{where} must map request ids to values, got {type(values).__name__}"
    for rid, value in values.items():
        if not isinstance(rid, str):
            return f"{where} has a key that is not a request id: {rid!r}"
        if not valid(value):
            what = "an integer >= 0" if valid is _count else "a sequence of integer page ids"
            return f"{where}[{rid!r}] must be {what}, got {value!r}"
    return ""


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _page_ids(pages: Any) -> bool:
    return isinstance(pages, tuple | list) and all(type(page) is int for page in pages)
