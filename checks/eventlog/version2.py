"""Iteration lines of an event log, version 2: operations in order, pages as deltas.

A version-2 iteration line lists what the engine did, in the order it did it (spec/eventlog.md,
section 8): the schedule (``arrive``, ``preempt``, ``free``, ``admit``, ``alloc``, ``share``),
then the step (``cache``, ``compute``, ``token``, ``decode``), then the update (``finish``,
``free``, late ``arrive``). Page tables travel as the pages each operation adds or frees, with an
optional full snapshot (``tables``) that must agree with them. A log may declare its allocator
count-only (``"pages": "counts"``): operations then carry page counts, and :class:`Lowering`
hands out stand-in page ids as a correct pool would, so the monitor checks the counts (PAGE-1,
PAGE-3, PAGE-4, PAGE-5) while no finding can rest on a page's identity (PAGE-2).

:class:`Lowering` keeps the live tables and the batch, and turns each line into the
:class:`~kvsched.spec.events.IterationEvent` the monitor reads, its schedule kept in order.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Literal

import msgspec

from kvsched.checks.eventlog.ids import decode_ids, ids_error
from kvsched.checks.eventlog.lines import EventLogError
from kvsched.checks.eventlog.version1 import Count, FaultLine, Id, Pages
from kvsched.spec.events import IterationEvent, Op
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload

PageMode = Literal["ids", "counts"]
Amount = tuple[Count, ...] | Count  # page ids, or a page count in a count-only log


class Arrive(msgspec.Struct, tag="arrive", array_like=True):
    request: Id


class Preempt(msgspec.Struct, tag="preempt", array_like=True):
    request: Id


class Admit(msgspec.Struct, tag="admit", array_like=True):
    request: Id


class Alloc(msgspec.Struct, tag="alloc", array_like=True):
    request: Id
    pages: Amount


class Share(msgspec.Struct, tag="share", array_like=True):
    request: Id
    pages: tuple[Count, ...]


class Free(msgspec.Struct, tag="free", array_like=True):
    request: Id
    pages: Amount


class Cache(msgspec.Struct, tag="cache", array_like=True):
    request: Id
    tokens: Count


class Compute(msgspec.Struct, tag="compute", array_like=True):
    request: Id
    tokens: Count


class Token(msgspec.Struct, tag="token", array_like=True):
    request: Id


class Decode(msgspec.Struct, tag="decode", array_like=True):
    """Each request listed computes one token and produces one: a decode step, in one op.

    The list is kept as its JSON (:func:`ids_json`) until it is read: a steady batch decodes
    the same list on every line, and comparing bytes costs less than making its ids again."""

    requests: msgspec.Raw


class Finish(msgspec.Struct, tag="finish", array_like=True):
    request: Id


Operation = (
    Arrive | Preempt | Admit | Alloc | Share | Free | Cache | Compute | Token | Decode | Finish
)

NO_QUEUE = msgspec.Raw()
"""An iteration line's ``waiting`` when the field is absent; msgspec omits only this object."""

SCHEDULE, STEP, UPDATE = 0, 1, 2
_PHASE: dict[type, int] = {
    Preempt: SCHEDULE, Admit: SCHEDULE, Alloc: SCHEDULE, Share: SCHEDULE,
    Cache: STEP, Compute: STEP, Token: STEP, Decode: STEP, Finish: UPDATE,
}  # fmt: skip
_PHASE_NAMES = ("the schedule", "the step", "the update")


class IterationLine(
    msgspec.Struct,
    tag="iteration",
    tag_field="type",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    iteration: Count
    ops: tuple[Operation, ...]
    free_pages: Count
    waiting: msgspec.Raw = NO_QUEUE
    """The queue's JSON, a list of ids: :class:`~.queue.QueueReader` decodes it, mostly from
    the last line's (empty: the field is absent, an empty queue)."""
    tables: Pages | None = None

    def keys(self) -> int:
        """How many keys this line's JSON holds, ``tables``' included, if none repeats."""
        keys = 5 if self.waiting else 4
        return keys if self.tables is None else keys + 1 + len(self.tables)


DECODER = msgspec.json.Decoder(IterationLine | FaultLine)
ENCODER = msgspec.json.Encoder()


def ids_json(ids: tuple[str, ...]) -> msgspec.Raw:
    """A list of ids as the raw JSON a :class:`Decode` holds."""
    return msgspec.Raw(ENCODER.encode(ids))


def queue_json(waiting: tuple[str, ...]) -> msgspec.Raw:
    """The ``waiting`` field of a line whose queue is ``waiting``."""
    return ids_json(waiting) if waiting else NO_QUEUE


class Lowering:
    """The state a version-2 log's deltas build on: the batch and every live page table."""

    def __init__(self, workload: Workload, properties: TargetProperties, pages: PageMode) -> None:
        self.counts = pages == "counts"
        self.tables: dict[str, tuple[int, ...]] = {}
        self.batch: dict[str, None] = {}
        reserved = set(properties.reserved_pages)
        usable = (p for p in range(workload.limits.pool_pages) if p not in reserved)
        self.standins: deque[int] = deque(usable if self.counts else ())
        self.pool_pages = workload.limits.pool_pages
        self.beyond = self.pool_pages  # stand-ins past the pool: PAGE-5 names them

    def at(self, tables: dict[str, tuple[int, ...]], batch: tuple[str, ...]) -> Lowering:
        """A lowering of this log whose live tables and batch are ``tables`` and ``batch``: to
        lower again a line that was taken in without its event (a log of page ids only)."""
        other = copy.copy(self)
        other.tables, other.batch = dict(tables), dict.fromkeys(batch)
        return other

    def lower(self, line: IterationLine, waiting: tuple[str, ...], where: str) -> IterationEvent:
        """The event of one line whose queue is ``waiting``; :class:`EventLogError` if the line
        contradicts the format."""
        phase = SCHEDULE
        schedule: list[Op] = []
        arrived: list[str] = []
        allocated: dict[str, tuple[int, ...]] = {}
        shared: dict[str, tuple[int, ...]] = {}
        computed: dict[str, int] = {}
        cached: dict[str, int] = {}
        decoded: list[str] = []
        finished: list[str] = []
        freed: dict[str, tuple[int, ...]] = {}
        active: tuple[str, ...] = ()
        tables: dict[str, tuple[int, ...]] = {}
        for index, op in enumerate(line.ops):
            kind = type(op)
            at = f"{where}: field 'ops[{index}]'"
            if kind in _PHASE:
                if _PHASE[kind] < phase:
                    raise EventLogError(
                        f"{at}: '{op.__struct_config__.tag}' belongs to "
                        f"{_PHASE_NAMES[_PHASE[kind]]} but comes after {_PHASE_NAMES[phase]}; "
                        "an iteration's operations run schedule, then step, then update"
                    )
                if phase == SCHEDULE and _PHASE[kind] > SCHEDULE:
                    active, tables = self._scheduled()
                phase = _PHASE[kind]
            if isinstance(op, Decode):
                requests = decode_ids(op.requests)
                if requests is None:
                    raise ids_error(op.requests, f"ops[{index}][1]", where)
                for rid in requests:
                    computed[rid] = computed.get(rid, 0) + 1
                decoded.extend(requests)
            elif isinstance(op, Arrive):
                arrived.append(op.request)
                if phase == SCHEDULE:
                    schedule.append(Op("arrive", op.request))
            elif isinstance(op, Compute):
                computed[op.request] = computed.get(op.request, 0) + op.tokens
            elif isinstance(op, Token):
                decoded.append(op.request)
            elif isinstance(op, Cache):
                cached[op.request] = cached.get(op.request, 0) + op.tokens
            elif isinstance(op, Alloc | Share):
                pages = self._take(op.pages, at)
                self.tables[op.request] = self.tables.get(op.request, ()) + pages
                into = shared if isinstance(op, Share) else allocated
                into[op.request] = into.get(op.request, ()) + pages
                if isinstance(op, Share):
                    allocated[op.request] = allocated.get(op.request, ()) + pages
                schedule.append(
                    Op("share", op.request, pages)
                    if isinstance(op, Share)
                    else Op("alloc", op.request, pages)
                )
            elif isinstance(op, Free):
                pages = self._give_back(op.request, op.pages, at)
                if phase == SCHEDULE:
                    schedule.append(Op("free", op.request, pages))
                else:
                    phase = UPDATE
                    freed[op.request] = freed.get(op.request, ()) + pages
            elif isinstance(op, Admit):
                self.batch[op.request] = None
                schedule.append(Op("admit", op.request))
            elif isinstance(op, Preempt):
                self.batch.pop(op.request, None)
                schedule.append(Op("preempt", op.request))
            else:
                finished.append(op.request)
        if phase == SCHEDULE:
            active, tables = self._scheduled()
        if line.tables is not None:
            self._compare(line.tables, tables, where)
        for rid in finished:
            self.batch.pop(rid, None)
        return IterationEvent(
            line.iteration,
            arrived=tuple(arrived),
            admitted=tuple(op.request for op in schedule if op.kind == "admit"),
            active=active,
            decoded=tuple(decoded),
            finished=tuple(finished),
            page_tables=tables,
            allocated=allocated,
            freed=freed,
            free_pages=line.free_pages,
            waiting=waiting,
            computed=computed,
            cached=cached,
            shared=shared,
            preempted=tuple(op.request for op in schedule if op.kind == "preempt"),
            schedule=tuple(schedule),
        )

    def _scheduled(self) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
        """The batch and its tables once the schedule is done: what the step runs on."""
        active = tuple(self.batch)
        return active, {rid: self.tables[rid] for rid in active if rid in self.tables}

    def _take(self, pages: tuple[int, ...] | int, at: str) -> tuple[int, ...]:
        """Page ids as the log gives them, or stand-ins for a count (lowest free first)."""
        if not self.counts:
            if isinstance(pages, int):
                raise EventLogError(
                    f"{at}: gives a page count ({pages}) where this log lists page ids; a "
                    'count-only allocator declares "pages": "counts" in the header'
                )
            return pages
        if not isinstance(pages, int):
            raise EventLogError(
                f'{at}: lists page ids where this log, declared "pages": "counts", gives '
                "a page count"
            )
        taken = []
        for _ in range(pages):
            if self.standins:
                taken.append(self.standins.popleft())
            else:
                taken.append(self.beyond)
                self.beyond += 1
        return tuple(taken)

    def _give_back(self, rid: str, pages: tuple[int, ...] | int, at: str) -> tuple[int, ...]:
        """Take ``pages`` out of ``rid``'s live table; a count frees its last pages."""
        table = self.tables.get(rid, ())
        if self.counts:
            if not isinstance(pages, int):
                self._take(pages, at)  # raises: page ids in a count-only log
                return ()
            given = table[len(table) - pages :] if pages else ()
            if pages > len(table):  # more than it holds: a page it never had (PAGE-3)
                given = (*table, self.beyond)
                self.beyond += 1
            self.standins.extend(p for p in given if p < self.pool_pages and p in table)
        else:
            given = self._take(pages, at)
        gone = set(given)
        kept = tuple(p for p in table if p not in gone)
        if kept:
            self.tables[rid] = kept
        else:
            self.tables.pop(rid, None)
        return given

    def _compare(
        self, snapshot: dict[str, tuple[int, ...]], built: dict[str, tuple[int, ...]], where: str
    ) -> None:
        if self.counts:
            raise EventLogError(
                f"{where}: field 'tables': a count-only log has no page ids to snapshot"
            )
        for rid in sorted(set(snapshot) | set(built)):
            if snapshot.get(rid, ()) != built.get(rid, ()):
                raise EventLogError(
                    f"{where}: field 'tables': request {rid!r} holds "
                    f"{list(snapshot.get(rid, ()))} by the snapshot but "
                    f"{list(built.get(rid, ()))} by the operations so far; a snapshot repeats "
                    "what the operations built and must agree with them"
                )
