"""Iteration lines of an event log, version 2: operations in order, pages as deltas.

A version-2 iteration line lists what the engine did, in the order it did it (spec/eventlog.md,
section 8): the schedule (``arrive``, ``preempt``, ``free``, ``admit``, ``alloc``, ``share``), then
the step (``cache``, ``compute``, ``token``, ``decode``), then the update (``finish``, ``free``,
late ``arrive``); a target that declares ``state_slots`` takes and gives back its slots with
``slot`` and ``unslot``, in the schedule or the update. Page tables travel as the pages each
operation adds or frees, with an optional full snapshot (``tables``) that must agree with them. A
log may declare its allocator count-only (``"pages": "counts"``): operations then carry page
counts, and the lowering hands out stand-in page ids as a correct pool would, so the monitor checks
the counts (PAGE-1, PAGE-3, PAGE-4, PAGE-5) while no finding can rest on a page's identity
(PAGE-2). :mod:`.lowering` turns the lines into events.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from kvsched.checks.eventlog.version1 import Count, FaultLine, Id, Pages

PageMode = Literal["ids", "counts"]
RequestMode = Literal["header", "lines"]
"""Where a log declares its requests: all in the header's workload, or each in a request line
before it arrives (8.7)."""
Amount = tuple[Count, ...] | Count  # page ids, or a page count in a count-only log


# An iteration line and its operations hold strings, numbers, raw JSON and tuples and dicts of
# those, never a struct, so no reference cycle runs through them: they are made untracked by
# the garbage collector (gc=False). A line makes dozens, and each tracked one would count
# towards the next collection.
class Arrive(msgspec.Struct, tag="arrive", array_like=True, gc=False):
    request: Id


class Preempt(msgspec.Struct, tag="preempt", array_like=True, gc=False):
    request: Id


class Admit(msgspec.Struct, tag="admit", array_like=True, gc=False):
    request: Id


class Alloc(msgspec.Struct, tag="alloc", array_like=True, gc=False):
    request: Id
    pages: Amount


class Share(msgspec.Struct, tag="share", array_like=True, gc=False):
    request: Id
    pages: tuple[Count, ...]


class Free(msgspec.Struct, tag="free", array_like=True, gc=False):
    request: Id
    pages: Amount


class Cache(msgspec.Struct, tag="cache", array_like=True, gc=False):
    request: Id
    tokens: Count


class Compute(msgspec.Struct, tag="compute", array_like=True, gc=False):
    request: Id
    tokens: Count


class Token(msgspec.Struct, tag="token", array_like=True, gc=False):
    request: Id


class Decode(msgspec.Struct, tag="decode", array_like=True, gc=False):
    """Each request listed computes one token and produces one: a decode step, in one op.

    The list is kept as its JSON (:func:`ids_json`) until it is read: a steady batch decodes
    the same list on every line, and comparing bytes costs less than making its ids again."""

    requests: msgspec.Raw


class Finish(msgspec.Struct, tag="finish", array_like=True, gc=False):
    request: Id


class Slot(msgspec.Struct, tag="slot", array_like=True, gc=False):
    """The request takes state slot ``slot`` (a declared ``state_slots``, eventlog.md 4.14)."""

    request: Id
    slot: Count


class Unslot(msgspec.Struct, tag="unslot", array_like=True, gc=False):
    """The request gives state slot ``slot`` back."""

    request: Id
    slot: Count


Operation = (
    Arrive
    | Preempt
    | Admit
    | Alloc
    | Share
    | Free
    | Cache
    | Compute
    | Token
    | Decode
    | Finish
    | Slot
    | Unslot
)

NO_QUEUE = msgspec.Raw()
"""An iteration line's ``waiting`` when the field is absent; msgspec omits only this object."""

SCHEDULE, STEP, UPDATE = 0, 1, 2
PHASE: dict[type, int] = {  # each operation's phase (arrive, free, slot and unslot: either)
    Preempt: SCHEDULE, Admit: SCHEDULE, Alloc: SCHEDULE, Share: SCHEDULE,
    Cache: STEP, Compute: STEP, Token: STEP, Decode: STEP, Finish: UPDATE,
}  # fmt: skip
PHASE_NAMES = ("the schedule", "the step", "the update")


class IterationLine(
    msgspec.Struct,
    tag="iteration",
    tag_field="type",
    forbid_unknown_fields=True,
    omit_defaults=True,
    gc=False,
):
    iteration: Count
    ops: tuple[Operation, ...]
    free_pages: Count
    waiting: msgspec.Raw = NO_QUEUE
    """The queue's JSON, a list of ids: :class:`~.ids.QueueReader` decodes it, mostly from
    the last line's (empty: the field is absent, an empty queue)."""
    tables: Pages | None = None
    free_slots: Count | None = None
    """The state slots the target counts as free after the iteration: in every line of a log
    that declares ``state_slots``, in none of another's (eventlog.md 4.14)."""

    def keys(self) -> int:
        """How many keys this line's JSON holds, ``tables``' included, if none repeats
        (:func:`~.ids.split_queue` has it inlined, without ``free_slots``: a line that has it
        is read the slower way)."""
        keys = BARE_KEYS + 1 if self.waiting else BARE_KEYS
        keys += self.free_slots is not None
        return keys if self.tables is None else keys + 1 + len(self.tables)


BARE_KEYS = 1 + sum(field.required for field in msgspec.structs.fields(IterationLine))
"""The keys of an iteration line with neither a queue nor tables, read off the struct: its tag
and each field it requires."""


class RequestLine(msgspec.Struct, tag="request", tag_field="type", forbid_unknown_fields=True):
    """A request declared as it comes (8.7): a workload request's fields, checked as the
    workload's are (:func:`kvsched.spec.workload.parse_request`) once msgspec has typed them."""

    id: Id
    arrival: Count
    prompt_tokens: Count
    output_tokens: Count
    prefix_group: str | msgspec.UnsetType = msgspec.UNSET
    prefix_tokens: int | msgspec.UnsetType = msgspec.UNSET
    priority: int | msgspec.UnsetType = msgspec.UNSET

    def fields(self) -> dict[str, object]:
        """The fields the line gave, as the workload's JSON would."""
        given = msgspec.structs.asdict(self)
        return {name: value for name, value in given.items() if value is not msgspec.UNSET}


Line = IterationLine | RequestLine | FaultLine
DECODER = msgspec.json.Decoder(Line)


def line_keys(line: Line) -> int | None:
    """How many keys a decoded line's JSON holds if none repeats (``None``: a fault or request
    line, which is checked the slow way)."""
    return line.keys() if isinstance(line, IterationLine) else None


ENCODER = msgspec.json.Encoder()


def ids_json(ids: tuple[str, ...]) -> msgspec.Raw:
    """A list of ids as the raw JSON a :class:`Decode` holds."""
    return msgspec.Raw(ENCODER.encode(ids))


def queue_json(waiting: tuple[str, ...]) -> msgspec.Raw:
    """The ``waiting`` field of a line whose queue is ``waiting``."""
    return ids_json(waiting) if waiting else NO_QUEUE
