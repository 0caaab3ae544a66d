"""Iteration and fault lines of an event log, version 1, decoded fast (spec/eventlog.md).

The structs here are the schema's lines as msgspec types: decoding a line validates it and
yields the tuples and mappings an :class:`~kvsched.spec.events.IterationEvent` holds, with no
copy. A line that fails is read again by :mod:`.lines`' field-by-field checks, which word the
message; so the fast path and the precise one agree on what is malformed.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kvsched.checks.eventlog.lines import EventLogError, parse_event, parse_fault
from kvsched.checks.eventlog.source import decode_line, strict_json
from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.strict_json import json_kind

Id = Annotated[str, msgspec.Meta(min_length=1)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Ids = tuple[Id, ...]
Pages = dict[Id, tuple[Count, ...]]


class FaultLine(msgspec.Struct, tag="fault", tag_field="type", forbid_unknown_fields=True):
    """The target raised or broke the protocol (PROTO-1); the last line if present."""

    iteration: Count
    call: str
    message: str

    def fault(self) -> SchedulerFault:
        return SchedulerFault(self.iteration, self.call, self.message)


class IterationLine(msgspec.Struct, tag="iteration", tag_field="type", forbid_unknown_fields=True):
    """One iteration, every field of eventlog.md section 3 in the order a log writes them."""

    iteration: Count
    arrived: Ids
    admitted: Ids
    active: Ids
    decoded: Ids
    finished: Ids
    page_tables: Pages
    allocated: Pages
    freed: Pages
    free_pages: Count
    waiting: Ids
    computed: dict[Id, Count] | None = None
    cached: dict[Id, Count] = {}
    shared: Pages = {}
    preempted: Ids = ()

    def event(self) -> IterationEvent:
        return IterationEvent(
            self.iteration,
            self.arrived,
            self.admitted,
            self.active,
            self.decoded,
            self.finished,
            self.page_tables,
            self.allocated,
            self.freed,
            self.free_pages,
            self.waiting,
            self.computed,
            self.cached,
            self.shared,
            self.preempted,
        )


_DECODER = msgspec.json.Decoder(IterationLine | FaultLine)


def decode_v1(line: bytes, where: str) -> IterationEvent | SchedulerFault:
    """A version-1 iteration or fault line; :class:`EventLogError` naming the field if malformed.

    The field-by-field reader has the last word: a line msgspec refuses but it accepts (a lone
    surrogate escaped in a string, which msgspec does not decode) is read its way.
    """
    try:
        decoded = decode_line(_DECODER, line, where)
    except EventLogError as fast:
        return _precise(line, where, fast)
    return decoded.event() if isinstance(decoded, IterationLine) else decoded.fault()


def _precise(line: bytes, where: str, fast: EventLogError) -> IterationEvent | SchedulerFault:
    """The line as the field-by-field reader reads it; its message if it refuses it too."""
    document = strict_json(line, where)
    if not isinstance(document, dict):
        raise EventLogError(f"{where}: must be a JSON object, got {json_kind(document)}")
    kind = document.get("type")
    if kind == "iteration":
        return parse_event(document, where)
    if kind == "fault":
        return parse_fault(document, where)
    if "type" in document:
        raise EventLogError(f"{where}: field 'type' must be 'iteration' or 'fault', got {kind!r}")
    raise fast
