"""The lists of ids a version-2 line carries as raw JSON: its queue and its decode list.

Both mostly repeat the last line's, so each is decoded only when its bytes change.
:func:`decode_ids` decodes and validates one; :func:`split_queue` decodes a line but its queue,
:class:`QueueReader` reads the queue as a change to the last line's, and :class:`DecodeList`
the decode list so.

A busy engine's queue can hold hundreds of requests, and a log repeats it on every line. From
one line to the next it mostly stays the same, or loses a few requests at its head (admitted)
and gains a few at its tail (arrived). Decoding hundreds of ids on every line would cost more
than checking the line, so :class:`QueueReader` keeps the last queue with its JSON and decodes
only the new tail.

It trusts only bytes it decoded before. The last queue's JSON must be canonical (compact, each
id as msgspec writes it), which fixes where each of its ids starts and ends. The new JSON must
repeat the old one's bytes from a cut between two ids to the end, byte for byte, and whatever
follows them must decode as a list of ids written canonically. The new JSON is then whole ids
decoded before and after, so it needs no other check: :meth:`QueueReader.accept` takes bytes no
decoder has seen. Any other change is decoded whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from kvsched.checks.eventlog.lines import EventLogError
from kvsched.checks.eventlog.source import validation_message
from kvsched.checks.eventlog.version1 import Ids
from kvsched.checks.eventlog.version2 import BARE_KEYS, DECODER, IterationLine

# Final: compiled statics, not looked up in the module's globals at each use (a name imported
# from an interpreted module too).
_IDS: Final = msgspec.json.Decoder(Ids)
_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = DECODER
_LINE: Final = IterationLine
_BARE_KEYS: Final = BARE_KEYS
_QUEUE_KEY: Final = b',"waiting":['
# An iteration line's head as the writer lays it out, but for its numbers and its operations.
_HEAD: Final = b'{"type":"iteration","iteration":'
_OPS: Final = b',"ops":'
_FREE: Final = b',"free_pages":'
_LAID_OUT: Final = (_HEAD + _OPS + _FREE).count(b":")
_COLON: Final = ord(":")  # an int: bytes' "in" tries a bytes needle as an int first, and fails


def split_queue(line: bytes) -> tuple[IterationLine, bytes] | None:
    """An iteration line written compactly with its queue last, as :mod:`.writer` writes it,
    decoded without its queue, and the queue's JSON unread; ``None`` for any other line.

    A busy engine's queue is most of a line's bytes, and it mostly repeats the last line's, so
    its JSON is left to :meth:`QueueReader.accept` rather than scanned by the decoder.
    The split is sound: ``,"waiting":[`` cannot lie inside a string (its quote would be
    escaped), so the last one is a key; a cut inside a key of ``tables`` or inside a string
    leaves a head that does not decode as an iteration line, or that holds a queue of its own
    (a repeated key), and either goes the usual way."""
    if not line.endswith(b"]}"):
        return None
    at = line.rfind(_QUEUE_KEY)
    if at < 0:
        return None
    head = line[:at] + b"}"
    try:
        read = _DECODER.decode(head)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if type(read) is not _LINE or read.waiting:
        return None
    # IterationLine.keys() for a line without its queue, inlined: this runs on every line.
    tables = read.tables
    keys = _BARE_KEYS if tables is None else _BARE_KEYS + 1 + len(tables)
    # A head laid out as written holds _LAID_OUT colons exactly: the count, without counting.
    if not (keys == _LAID_OUT and _laid_out(head)) and head.count(b":") != keys:
        return None
    return read, line[at + len(_QUEUE_KEY) - 1 : -1]


def _laid_out(head: bytes) -> bool:
    """Whether ``head`` is laid out as the writer writes it, with no colon in its operations:
    then it holds only the colons of :data:`_HEAD`, :data:`_OPS` and :data:`_FREE` (between
    them, digits), told by a few compiled comparisons and one ``memchr`` over the operations,
    where counting its colons tests every byte in turn."""
    if not head.startswith(_HEAD):
        return False
    start = len(_HEAD)
    while start < len(head) and _digit(head[start]):
        start += 1
    if head[start : start + len(_OPS)] != _OPS:
        return False
    start += len(_OPS)
    end = len(head) - 1  # the closing brace
    while end > start and _digit(head[end - 1]):
        end -= 1
    end -= len(_FREE)
    if end < start or head[end : end + len(_FREE)] != _FREE:
        return False
    return _COLON not in head[start:end]


def _digit(byte: int) -> bool:
    return 48 <= byte <= 57  # b"0" to b"9"


def decode_ids(raw: msgspec.Raw | bytes) -> tuple[str, ...] | None:
    """The ids of a list whose JSON is ``raw`` (msgspec checked its syntax); ``None`` if it is
    not a list of ids, which :func:`ids_error` words."""
    try:
        return _IDS.decode(raw)
    except msgspec.ValidationError:
        return None


def appended(raw: bytes, head: bytes) -> tuple[str, ...] | None:
    """The ids that follow those whose canonical JSON is ``head`` (as msgspec writes them) in
    the list whose JSON is ``raw``, if ``raw`` is ``head`` but for its closing bracket, then
    that bracket or a comma and a list of ids; ``None`` if not (:func:`decode_ids` then decodes
    it whole).

    Sound for bytes no decoder has seen: ``head`` decodes to its ids, and if ``[`` and what
    follows the comma decode as a list of one id or more, ``raw`` is a list of ``head``'s ids
    and then those, and decodes to them."""
    end = len(head) - 1  # head's closing bracket
    if raw[:end] != head[:end]:
        return None
    rest = raw[end:]
    if rest == b"]":
        return ()
    if rest[:1] != b"," or end < 2:  # "[" and a comma: no list
        return None
    try:
        tail = _IDS.decode(b"[" + rest[1:])
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None
    return tail if tail else None  # "[ids,]" is no list


class DecodeList:
    """The decode list of each line in turn, as ids and as a set of them.

    From one line to the next a decode list mostly stays the same, or loses the requests that
    left the batch (finished, or preempted) and gains at its end those that computed their
    prompt's end. Decoding it whole makes every id anew, and hashing them into a set costs as
    much again, so a changed list is first read as the last one's ids less those that left, in
    their order, and then new ids (:func:`appended`): the ids kept are the same objects, their
    hashes already made, and only the new ones are decoded and added to the set. Who left is
    the caller's guess; the bytes decide. Any other change is decoded whole."""

    def __init__(self) -> None:
        self.raw = msgspec.Raw(b"[]")
        self.ids: tuple[str, ...] = ()
        self.members: set[str] = set()
        """The ids of :attr:`ids` as a set: one object, updated as they change, for the fast
        path to read on the line it was read for."""
        self.written: bytes | None = b"[]"
        """The canonical JSON of :attr:`ids`, where it is known."""

    def read(self, raw: msgspec.Raw, left: dict[str, None] | None, batch: dict[str, None]) -> bool:
        """Read ``raw``, a decode list's JSON, into :attr:`ids` and :attr:`members`; ``False``
        if it is not a list of ids, the last list kept. ``left``: who is likely to have left
        the list since it was last read, ``None`` if any not in ``batch`` may have."""
        if raw == self.raw:
            return True
        old, members = self.ids, self.members
        dropped: list[str] = []
        if left is None:
            for rid in old:
                if rid not in batch:
                    dropped.append(rid)
        elif left:
            for rid in left:  # a few: each looked up once, not each id of the list
                if rid in members:
                    dropped.append(rid)
        kept, written = old, self.written
        cuts: list[int] = []
        if dropped and len(members) == len(old):  # each id once: cut out where it stands
            parts: list[str] = []
            start = 0
            cuts = sorted([old.index(rid) for rid in dropped])
            for at in cuts:
                parts.extend(old[start:at])
                start = at + 1
            parts.extend(old[start:])
            kept = tuple(parts)
        elif dropped:
            gone = set(dropped)
            kept = tuple([rid for rid in old if rid not in gone])
        head, tail = b"[]", None
        if kept:
            if kept is not old:
                written = _cut(written, old, cuts) if written is not None and cuts else None
            # msgspec decodes no lone surrogate, so every id it decoded encodes.
            head = written or _ENCODER.encode(kept)
            tail = appended(bytes(raw), head)
        if tail is None:
            ids = decode_ids(raw)
            if ids is None:
                return False
            self.members, self.written = set(ids), None
        else:
            # An id is kept or dropped wherever it stands in the list, so the set less the
            # dropped is the set of those kept.
            for rid in dropped:
                members.discard(rid)
            members.update(tail)
            ids = kept + tail
            self.written = head[:-1] + b"," + _ENCODER.encode(tail)[1:] if tail else head
        self.raw, self.ids = raw, ids
        return True


def _cut(written: bytes, ids: tuple[str, ...], cuts: list[int]) -> bytes | None:
    """The canonical JSON of ``ids`` less the ids at positions ``cuts`` (ascending, at least one
    id kept), cut out of ``written``, the canonical JSON of ``ids``; ``None`` if an id is not
    plain ASCII.

    A steady decode list loses a few ids on most lines; encoding the rest again would cost
    more than checking the line. Sound: an id's canonical JSON is its characters between
    quotes, one byte each if plain ASCII (no escape) and more otherwise, so ``written`` (a
    bracket, then each id followed by a comma or the closing bracket) is one byte longer than
    the ids' lengths plus three each only if every id is plain; each id then lies where the
    lengths before it place it."""
    size = 1
    for rid in ids:
        size += len(rid) + 3
    if size != len(written):
        return None
    parts: list[bytes] = []
    start, place, index = 0, 1, 0  # the bytes kept from start; id ``index`` starts at place
    for at in cuts:
        while index < at:
            place += len(ids[index]) + 3
            index += 1
        parts.append(written[start:place])
        place += len(ids[at]) + 3  # past the id cut out and the comma or bracket after it
        start, index = place, at + 1
    parts.append(written[start:])
    # Each id kept has the comma or bracket after it: the last one's closes the list.
    return b"".join(parts)[:-1] + b"]"


def ids_error(raw: msgspec.Raw | bytes, field: str, where: str) -> EventLogError:
    """What is wrong with the list of ids at ``field`` whose JSON is ``raw``."""
    try:
        _IDS.decode(raw)
    except msgspec.ValidationError as error:
        message = validation_message(str(error))
        inside = "field '"  # a place in the list, as "field '[3]': expected str, got int"
        if message.startswith(inside):
            return EventLogError(f"{where}: field '{field}" + message[len(inside) :])
        return EventLogError(f"{where}: field '{field}': {message}")
    return EventLogError(f"{where}: field '{field}': not a list of request ids")


_HEADS = 8
"""Most requests a line may admit from the head and still be read as a change."""


class QueueReader:
    """The queue of each line in turn, as a tuple of ids, and whether all are the workload's."""

    def __init__(self, known: Iterable[str]) -> None:
        self.width = {rid: len(_ENCODER.encode(rid)) for rid in known}
        """Each request's id as canonical JSON, in bytes."""
        self.raw = b"[]"
        self.ids: tuple[str, ...] = ()
        self.known = True
        """Whether every id of :attr:`ids` is the workload's."""
        self.canonical = True
        """Whether :attr:`raw` is the canonical JSON of :attr:`ids`."""

    def declare(self, rid: str) -> None:
        """``rid`` is the workload's from now on (a request line declared it)."""
        self.width[rid] = len(_ENCODER.encode(rid))

    def forget(self, rid: str) -> None:
        """``rid`` finished: a queue that names it again is decoded whole (and judged)."""
        self.width.pop(rid, None)

    def read(self, raw: msgspec.Raw, where: str) -> tuple[str, ...]:
        """The ids of the queue whose JSON is ``raw``; :class:`EventLogError` if it is not a list
        of ids. :attr:`known` says whether each is the workload's."""
        new = bytes(raw) or b"[]"  # an absent field: an empty queue
        ids = self.accept(new)
        if ids is None:
            raise ids_error(new, "waiting", where)
        return ids

    def accept(self, new: bytes) -> tuple[str, ...] | None:
        """:meth:`read` for JSON bytes that may be anything: the ids if they are a list of ids,
        else ``None``, the queue read so far unchanged."""
        if new == self.raw:
            return self.ids
        ids = self._changed(new) if self.canonical and self.known and self.ids else None
        if ids is None:
            try:
                ids = _IDS.decode(new)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                return None
            width = self.width
            self.known = all(rid in width for rid in ids)
            self.canonical = self.known and len(new) == _length(ids, width)
        self.raw, self.ids = new, ids
        return ids

    def _changed(self, new: bytes) -> tuple[str, ...] | None:
        """The new queue if it is the last one less up to :data:`_HEADS` heads, more a tail of
        the workload's requests, in canonical JSON; ``None`` if it is not."""
        old, ids, width = self.raw, self.ids, self.width
        if new[:1] != b"[":
            return None
        end = len(old) - 1  # the closing bracket
        cut = 1
        for heads in range(min(len(ids), _HEADS + 1)):
            if heads:
                head = width.get(ids[heads - 1])
                if head is None:  # finished since, and forgotten: decode the queue whole
                    return None
                cut += head + 1
            kept = end - cut
            # Two slices compared, compiled, where startswith with a start parses its arguments.
            if new[1 : 1 + kept] == old[cut:end]:
                rest = new[1 + kept :]
                if rest == b"]":
                    return ids[heads:]
                if rest[:1] != b",":
                    return None
                try:
                    tail = _IDS.decode(b"[" + rest[1:])
                except (msgspec.ValidationError, msgspec.DecodeError):
                    return None
                length = 1  # "," and the tail, "]" for "["
                for rid in tail:
                    if rid not in width:
                        return None
                    length += width[rid] + 1
                if len(rest) != length:
                    return None
                return ids[heads:] + tail
        return None


def _length(ids: tuple[str, ...], width: dict[str, int]) -> int:
    """The length of the canonical JSON of ``ids``, all of them the workload's."""
    return 1 + sum(width[rid] + 1 for rid in ids) if ids else 2
