"""One line of a version-1 event log: to JSON, and back with every field checked by hand.

The fast reader (:mod:`.version1`) decodes lines with msgspec; when it refuses one, the checks
here read it again, field by field, against the same rules as ``schemas/eventlog.schema.json``,
to say exactly what is wrong. What spans lines is :mod:`.stream`'s. A malformed line raises
:class:`EventLogError` naming the file, the line and the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.strict_json import json_kind

LOG_FORMAT = "kvsched-eventlog"
LOG_VERSION = 1

# Iteration fields and their kinds, in the order a log writes them (eventlog.md, section 3).
_REQUIRED = {
    "iteration": "count",
    "arrived": "ids",
    "admitted": "ids",
    "active": "ids",
    "decoded": "ids",
    "finished": "ids",
    "page_tables": "pages",
    "allocated": "pages",
    "freed": "pages",
    "free_pages": "count",
    "waiting": "ids",
}
_OPTIONAL = {"computed": "counts", "cached": "counts", "shared": "pages", "preempted": "ids"}


class EventLogError(ValueError):
    """An event log is malformed. The message names the file, the line and the field."""


def event_json(event: IterationEvent) -> dict[str, Any]:
    document: dict[str, Any] = {"type": "iteration"}
    for name in _REQUIRED:
        document[name] = _plain(getattr(event, name))
    if event.preempted:
        # Version 1 has one 'freed' list per request: preemption's releases join it. Exact
        # unless a request preempted in an iteration also frees in it (spec/eventlog.md 4.6).
        # The preemptions' come first, as they were done first.
        freed: dict[str, tuple[int, ...]] = {}
        for op in event.schedule:
            if op.kind == "free" and op.request in event.preempted:
                freed[op.request] = (*freed.get(op.request, ()), *op.pages)
        for rid, pages in event.freed.items():
            freed[rid] = (*freed.get(rid, ()), *pages)
        document["freed"] = freed
    optional = {
        "computed": event.computed,
        "cached": event.cached or None,
        "shared": event.shared or None,
        "preempted": event.preempted or None,
    }
    for name, value in optional.items():
        if value is not None:
            document[name] = _plain(value)
    return document


def _plain(value: Any) -> Any:
    # json writes tuples and lists as arrays, a dict as an object: copy any other kind.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str | tuple | list):
        return list(value)
    return value


def parse_fault(document: dict[str, Any], where: str) -> SchedulerFault:
    _known(document, {"type", "iteration", "call", "message"}, where)
    for field in ("iteration", "call", "message"):
        if field not in document:
            raise EventLogError(f"{where}: missing field '{field}'")
    iteration = _count(document["iteration"], f"{where}: field 'iteration'")
    for field in ("call", "message"):
        if not isinstance(document[field], str):
            raise EventLogError(
                f"{where}: field '{field}' must be a string, got {json_kind(document[field])}"
            )
    return SchedulerFault(iteration, document["call"], document["message"])


def parse_event(document: dict[str, Any], where: str) -> dict[str, Any]:
    """A version-1 iteration line's fields, each checked, by name."""
    _known(document, {"type", *_REQUIRED, *_OPTIONAL}, where)
    values: dict[str, Any] = {}
    for name, kind in (*_REQUIRED.items(), *_OPTIONAL.items()):
        if name in document:
            values[name] = _value(document[name], kind, f"{where}: field '{name}'")
        elif name in _REQUIRED:
            raise EventLogError(f"{where}: missing field '{name}'")
    return values  # the iteration number is checked against the previous line


def _value(raw: Any, kind: str, where: str) -> Any:
    if kind == "count":
        return _count(raw, where)
    if kind == "ids":
        if not isinstance(raw, list):
            raise EventLogError(f"{where} must be an array of request ids, got {json_kind(raw)}")
        for index, item in enumerate(raw):
            if not isinstance(item, str) or not item:
                raise EventLogError(
                    f"{where}[{index}] must be a non-empty string (a request id), got {item!r}"
                )
        return tuple(raw)
    if not isinstance(raw, dict):
        raise EventLogError(f"{where} must be an object keyed by request id, got {json_kind(raw)}")
    result: dict[str, Any] = {}
    for rid, item in raw.items():
        if not rid:
            raise EventLogError(f"{where} has an empty request id as a key")
        if kind == "counts":
            result[rid] = _count(item, f"{where}['{rid}']")
            continue
        if not isinstance(item, list):
            raise EventLogError(
                f"{where}['{rid}'] must be an array of page ids, got {json_kind(item)}"
            )
        result[rid] = tuple(_count(p, f"{where}['{rid}'][{i}]") for i, p in enumerate(item))
    return result


def _count(raw: Any, where: str) -> int:
    # bool is an int subclass in Python, but true/false is never a page id or a token count.
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise EventLogError(f"{where} must be an integer >= 0, got {raw!r}")
    return raw


def _known(document: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(document) - known)
    if unknown:
        raise EventLogError(
            f"{where}: unknown field '{unknown[0]}' (known fields: {', '.join(sorted(known))})"
        )


def check_engine_ids(event: IterationEvent, known: Set[str], where: str) -> None:
    """``arrived`` and ``waiting`` are the engine's own records: only the workload's requests."""
    for name in ("arrived", "waiting"):
        unknown = [rid for rid in getattr(event, name) if rid not in known]
        if unknown:
            raise EventLogError(
                f"{where}: field '{name}' names {unknown[0]!r}, which is not a request of the "
                "header's workload"
            )
