"""A version-2 log's lines lowered to the events the monitor reads (spec/eventlog.md, section 8).

:class:`Lowering` keeps the live tables and the batch that the lines' deltas build on, and turns
each line into the :class:`~kvsched.spec.events.IterationEvent` the monitor reads, its schedule
kept in order. In a count-only log it hands out stand-in page ids as a correct pool would.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from kvsched.checks.eventlog.ids import decode_ids, ids_error
from kvsched.checks.eventlog.lines import EventLogError
from kvsched.checks.eventlog.version2 import (
    PHASE,
    PHASE_NAMES,
    SCHEDULE,
    UPDATE,
    Admit,
    Alloc,
    Arrive,
    Cache,
    Compute,
    Decode,
    Finish,
    Free,
    IterationLine,
    PageMode,
    Preempt,
    Share,
    Slot,
    Token,
    Unslot,
)
from kvsched.spec.events import IterationEvent, Op
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload

# The kinds of operation as compiled statics (as in steady_ops.py): a name imported from an
# interpreted module is looked up in this module's globals at each use.
_DECODE: Final = Decode
_ALLOC: Final = Alloc
_SHARE: Final = Share
_FREE: Final = Free
_COMPUTE: Final = Compute
_TOKEN: Final = Token
_FINISH: Final = Finish
_ADMIT: Final = Admit
_PREEMPT: Final = Preempt
_CACHE: Final = Cache
_ARRIVE: Final = Arrive
_SLOT: Final = Slot
_UNSLOT: Final = Unslot
# And the phases, and the operation the schedule is made of, so.
_PHASE: Final = PHASE
_SCHEDULE: Final = SCHEDULE
_UPDATE: Final = UPDATE
_OP: Final = Op


class Lowering:
    """The state a version-2 log's deltas build on: the batch and every live page table."""

    def __init__(self, workload: Workload, properties: TargetProperties, pages: PageMode) -> None:
        self.made = (workload, properties, pages)
        self.counts = pages == "counts"
        self.tables: dict[str, tuple[int, ...]] = {}
        self.batch: dict[str, None] = {}
        reserved = set(properties.reserved_pages)
        usable = (p for p in range(workload.limits.pool_pages) if p not in reserved)
        self.standins: deque[int] = deque(usable if self.counts else ())
        self.pool_pages = workload.limits.pool_pages
        self.beyond = self.pool_pages  # stand-ins past the pool: PAGE-5 names them
        self.slotted = properties.state_slots is not None
        self.slots: dict[str, int] = {}
        """Each request holding a state slot, with its slot, as the lines' operations left it."""

    def at(self, tables: dict[str, tuple[int, ...]], batch: tuple[str, ...]) -> Lowering:
        """A lowering of this log whose live tables and batch are ``tables`` and ``batch``: to
        lower again a line that was taken in without its event (a log of page ids only)."""
        other = Lowering(*self.made)  # a compiled class cannot be copied
        other.standins, other.beyond = self.standins, self.beyond
        other.tables, other.batch = dict(tables), dict.fromkeys(batch)
        other.slots = dict(self.slots)  # a line taken in without its event moves no slot
        return other

    def lower(self, line: IterationLine, waiting: tuple[str, ...], where: str) -> IterationEvent:
        """The event of one line whose queue is ``waiting``; :class:`EventLogError` if the line
        contradicts the format."""
        phase = _SCHEDULE
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
        slots = self._slots_declared(line, where)
        scheduled_slots: dict[str, int] | None = None  # the holders once the schedule is done
        for index, op in enumerate(line.ops):
            ranked = _PHASE.get(type(op))  # None: arrive, free, slot and unslot go in either
            if ranked is not None:
                if ranked < phase:
                    raise EventLogError(
                        f"{_at(where, index)}: '{op.__struct_config__.tag}' belongs to "
                        f"{PHASE_NAMES[ranked]} but comes after {PHASE_NAMES[phase]}; "
                        "an iteration's operations run schedule, then step, then update"
                    )
                if phase == _SCHEDULE and ranked > _SCHEDULE:
                    active, tables = self._scheduled()
                    scheduled_slots = None if slots is None else dict(slots)
                phase = ranked
            # By the operation's exact type, as PHASE above, not by class patterns: compiled, each
            # pattern is an isinstance call through msgspec's metaclass, several an operation.
            if type(op) is _DECODE:
                requests = decode_ids(op.requests)
                if requests is None:
                    raise ids_error(op.requests, f"ops[{index}][1]", where)
                each = dict.fromkeys(requests, 1)
                if len(each) == len(requests) and computed.keys().isdisjoint(each):
                    computed.update(each)  # the usual decode list: in C, in the same order
                else:
                    for rid in requests:
                        computed[rid] = computed.get(rid, 0) + 1
                decoded.extend(requests)
            elif type(op) is _ALLOC or type(op) is _SHARE:
                pages = self._take(op.pages, where, index)
                self.tables[op.request] = self.tables.get(op.request, ()) + pages
                allocated[op.request] = allocated.get(op.request, ()) + pages
                if type(op) is _SHARE:
                    shared[op.request] = shared.get(op.request, ()) + pages
                schedule.append(_OP(op.__struct_config__.tag, op.request, pages))  # type: ignore[arg-type]
            elif type(op) is _FREE:
                pages = self._give_back(op.request, op.pages, where, index)
                if phase == _SCHEDULE:
                    schedule.append(_OP("free", op.request, pages))
                else:
                    phase = _UPDATE
                    freed[op.request] = freed.get(op.request, ()) + pages
            elif type(op) is _COMPUTE:
                computed[op.request] = computed.get(op.request, 0) + op.tokens
            elif type(op) is _TOKEN:
                decoded.append(op.request)
            elif type(op) is _FINISH:
                finished.append(op.request)
            elif type(op) is _ADMIT:
                self.batch[op.request] = None
                schedule.append(_OP("admit", op.request))
            elif type(op) is _PREEMPT:
                self.batch.pop(op.request, None)
                schedule.append(_OP("preempt", op.request))
            elif type(op) is _CACHE:
                cached[op.request] = cached.get(op.request, 0) + op.tokens
            elif type(op) is _ARRIVE:
                arrived.append(op.request)
                if phase == _SCHEDULE:
                    schedule.append(_OP("arrive", op.request))
            elif type(op) is _SLOT or type(op) is _UNSLOT:
                if slots is None:
                    raise EventLogError(
                        f"{_at(where, index)}: '{op.__struct_config__.tag}' takes or gives "
                        "back a state slot, but the header declares no state_slots"
                    )
                if phase != _SCHEDULE:
                    phase = _UPDATE
                if type(op) is _SLOT:
                    # A second slot for one request replaces the first in the snapshot:
                    # the first is then held by no one, and the free count shows it.
                    slots[op.request] = op.slot
                elif slots.get(op.request) == op.slot:
                    del slots[op.request]
                # An unslot of a slot the request does not hold leaves what it holds: if
                # it no longer runs, SLOT-2 names it.
            else:  # the decoder makes only the kinds above (tests/cover lowers each)
                raise AssertionError(f"unhandled operation: {op!r}")
        if phase == _SCHEDULE:
            active, tables = self._scheduled()
            scheduled_slots = None if slots is None else dict(slots)
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
            slots=scheduled_slots,
            slots_after=None if slots is None else dict(slots),
            free_slots=line.free_slots,
        )

    def _slots_declared(self, line: IterationLine, where: str) -> dict[str, int] | None:
        """The live slot holders a line's operations change, where the header declares state
        slots (``None`` otherwise); :class:`EventLogError` if its free slot count is missing
        there, or given where none are declared."""
        if self.slotted != (line.free_slots is not None):
            if self.slotted:
                raise EventLogError(
                    f"{where}: missing field 'free_slots' (required in every iteration line of "
                    "a log whose target declares state_slots)"
                )
            raise EventLogError(
                f"{where}: field 'free_slots' is given, but the header declares no state_slots"
            )
        return self.slots if self.slotted else None

    def _scheduled(self) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
        """The batch and its tables once the schedule is done: what the step runs on."""
        active, tables = tuple(self.batch), self.tables
        if tuple(tables) == active:  # most lines: every live table is the batch's, in its order
            return active, dict(tables)
        return active, {rid: tables[rid] for rid in active if rid in tables}

    def _take(self, pages: tuple[int, ...] | int, where: str, index: int) -> tuple[int, ...]:
        """Page ids as the log gives them, or stand-ins for a count (lowest free first)."""
        if not self.counts:
            if isinstance(pages, int):
                raise EventLogError(
                    f"{_at(where, index)}: gives a page count ({pages}) where this log lists "
                    'page ids; a count-only allocator declares "pages": "counts" in the header'
                )
            return pages
        if not isinstance(pages, int):
            raise EventLogError(
                f"{_at(where, index)}: lists page ids where this log, declared "
                '"pages": "counts", gives a page count'
            )
        taken = []
        for _ in range(pages):
            if self.standins:
                taken.append(self.standins.popleft())
            else:
                taken.append(self.beyond)
                self.beyond += 1
        return tuple(taken)

    def _give_back(
        self, rid: str, pages: tuple[int, ...] | int, where: str, index: int
    ) -> tuple[int, ...]:
        """Take ``pages`` out of ``rid``'s live table; a count frees its last pages."""
        table = self.tables.get(rid, ())
        if self.counts:
            if not isinstance(pages, int):
                self._take(pages, where, index)  # raises: page ids in a count-only log
                return ()
            given = table[len(table) - pages :] if pages else ()
            if pages > len(table):  # more than it holds: a page it never had (PAGE-3)
                given = (*table, self.beyond)
                self.beyond += 1
            self.standins.extend(p for p in given if p < self.pool_pages and p in table)
        else:
            given = self._take(pages, where, index)
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


def _at(where: str, index: int) -> str:
    """Where an operation is, for an error about it: made only when there is one."""
    return f"{where}: field 'ops[{index}]'"
