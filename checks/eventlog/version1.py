"""Iteration and fault lines of an event log, version 1, decoded fast (spec/eventlog.md).

The structs here are the schema's lines as msgspec types: decoding a line validates it and
yields the tuples and mappings an :class:`~kvsched.spec.events.IterationEvent` holds, with no
copy. A line that fails is read again by :mod:`.lines`' field-by-field checks, which word the
message; so the fast path and the precise one agree on what is malformed.

:class:`Version1Lowering` then lowers each line to the ordered operations every event carries
(:func:`~kvsched.spec.events.fixed_order`), from the tables the previous line ended with. A
line's ``allocated`` and ``shared`` must be what its tables gained: a table that changes
without the allocation that explains it is a finding or an invalid log, never silence.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kvsched.checks.eventlog.lines import EventLogError, parse_event, parse_fault
from kvsched.checks.eventlog.source import decode_line, strict_json
from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent, Op, fixed_order
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


_DECODER = msgspec.json.Decoder(IterationLine | FaultLine)


def decode_v1(line: bytes, where: str) -> IterationLine | SchedulerFault:
    """A version-1 iteration or fault line; :class:`EventLogError` naming the field if malformed.

    The field-by-field reader has the last word: a line msgspec refuses but it accepts (a lone
    surrogate escaped in a string, which msgspec does not decode) is read its way.
    """
    try:
        decoded = decode_line(_DECODER, line, where)
    except EventLogError as fast:
        return _precise(line, where, fast)
    return decoded if isinstance(decoded, IterationLine) else decoded.fault()


class Version1Lowering:
    """The tables a version-1 log's lines change: each line's event in the ordered form."""

    def __init__(self) -> None:
        self.tables: dict[str, tuple[int, ...]] = {}
        """Every table as the last line ended it: after its frees, without its finished."""

    def lower(self, line: IterationLine, where: str) -> IterationEvent:
        preempted, freed = line.preempted, line.freed
        released = {rid: freed.get(rid, ()) for rid in preempted}
        schedule, gained = fixed_order(
            self.tables,
            preempted,
            released,
            line.admitted,
            line.page_tables,
            line.shared,
        )
        _reconcile(line, schedule, gained, where)
        # A request preempted here released its pages in the schedule; 'freed' keeps the rest.
        after = {rid: pages for rid, pages in freed.items() if rid not in released}
        event = IterationEvent(
            line.iteration,
            line.arrived,
            line.admitted,
            line.active,
            line.decoded,
            line.finished,
            line.page_tables,
            gained,
            after if preempted else freed,
            line.free_pages,
            line.waiting,
            schedule,
            line.computed,
            line.cached,
            line.shared,
            preempted,
        )
        self.tables = event.tables_after()
        return event


def _reconcile(
    line: IterationLine,
    schedule: tuple[Op, ...],
    gained: dict[str, tuple[int, ...]],
    where: str,
) -> None:
    """A line's ``allocated`` and ``shared`` say what its tables gained. Where a table lost
    pages without a free, the monitor reports that (its ``lose``); elsewhere a claim that
    disagrees with the tables leaves no way to tell which is true: the log is invalid."""
    if not line.allocated and not gained:
        return
    lost = {op.request for op in schedule if op.kind == "lose"}
    for rid in sorted(set(line.allocated) | set(gained)):
        claimed, grew = line.allocated.get(rid, ()), gained.get(rid, ())
        if rid not in lost and (len(claimed) != len(grew) or set(claimed) != set(grew)):
            raise EventLogError(
                f"{where}: field 'allocated': request {rid!r} lists {list(claimed)}, but its "
                f"page table gained {list(grew)} since the line before; 'allocated' names "
                "exactly the pages that appeared in the table (spec/eventlog.md, section 3)"
            )
    for rid, pages in line.shared.items():
        if not set(pages) <= set(gained.get(rid, ())) and rid not in lost:
            raise EventLogError(
                f"{where}: field 'shared': request {rid!r} lists {list(pages)}, which are not "
                "all pages its table gained in this line; shared pages are a part of "
                "'allocated'"
            )


def _precise(line: bytes, where: str, fast: EventLogError) -> IterationLine | SchedulerFault:
    """The line as the field-by-field reader reads it; its message if it refuses it too."""
    document = strict_json(line, where)
    if not isinstance(document, dict):
        raise EventLogError(f"{where}: must be a JSON object, got {json_kind(document)}")
    kind = document.get("type")
    if kind == "iteration":
        return IterationLine(**parse_event(document, where))
    if kind == "fault":
        return parse_fault(document, where)
    if "type" in document:
        raise EventLogError(f"{where}: field 'type' must be 'iteration' or 'fault', got {kind!r}")
    raise fast
