"""The wire between kvsched and the process that hosts a target: framed msgpack, plain data only.

Both ends speak in frames: a 4-byte big-endian length, then one msgpack value. kvsched sends
``[op, *args]`` arrays (:data:`OPS`); the host answers every one with ``[status, payload]``
(:data:`STATUSES`), and a learner's ``step`` that asks it to run ahead with one such frame per
iteration, the last one ``stopped`` if it ran less far than asked (host.py, ``_Served._steps``).
Payloads are the spec's own dataclasses (``Request``, ``ScheduledBatch``, ``StepOutcome`` ...),
encoded by msgspec field by field from their type hints, so a new field or a new protocol type
crosses the wire without a change here; the reader of every answer is a msgspec decoder for the
exact type the protocol promises, which takes exact ints and strings only: no bools for ints, no
int subclasses, no pickles, no objects of the target's.
"""

from __future__ import annotations

import os
import struct
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from kvsched.spec import text as words
from kvsched.spec.protocol import Scheduler

MAX_FRAME = 64 * 1024 * 1024
"""The largest frame either end accepts: a learner's state for the largest pool fits easily. An
answer is also held to what its workload allows (:mod:`.bounds`), which is mostly far less."""

TEXT_LIMIT = words.TEXT_LIMIT
"""The longest exception text or message the host sends; longer text is cut there, and again
by :func:`printable` here."""

Op = Literal["load", "new", "call", "fn", "step"]
OPS: tuple[Op, ...] = typing.get_args(Op)
Status = Literal["ok", "raised", "exited", "unsendable", "refused", "stopped"]
STATUSES: tuple[Status, ...] = typing.get_args(Status)

PROTOCOL_METHODS = ("add_request", "schedule", "update_from_output")

_HEADER = struct.Struct(">I")


class WireError(Exception):
    """A frame that is not what the other end must send: too long, truncated or undecodable."""


@dataclass(frozen=True)
class Method:
    """One protocol method: the type of its argument (None: no argument) and of its answer."""

    argument: Any
    answer: Any


def protocol_methods() -> dict[str, Method]:
    """The scheduler protocol's methods, read off :class:`~kvsched.spec.protocol.Scheduler`."""
    methods = {}
    for name in PROTOCOL_METHODS:
        hints = typing.get_type_hints(getattr(Scheduler, name))
        answer = hints.pop("return")
        arguments = list(hints.values())
        methods[name] = Method(arguments[0] if arguments else None, answer)
    return methods


@dataclass(frozen=True)
class Description:
    """The declarations of the target the host loaded: its policy and properties, which are the
    target's own to make (and a grader's ``--allow`` to refuse). What is judged is not in it:
    kvsched reads the kind and a learner's functions itself (:mod:`.source`), and a ``kind``
    here that differs from that reading ends the check as PROTO-1."""

    kind: Literal["scheduler", "learner"]
    policy: Literal["", "static", "continuous"]
    properties: dict[str, Any] | None
    """The declared properties as JSON (spec.properties.properties_to_json), or none."""


@dataclass(frozen=True)
class Raised:
    """An exception raised by the target in a call, as text the host could format."""

    type: str
    """The exception's class name, as the target named it."""
    builtin: str
    """The nearest built-in exception class it derives from (``ValueError`` ...)."""
    text: str
    frames: str = ""
    """The frames of the target's own code, formatted in the host (the parent has no traceback
    of the call to trim)."""


_ENCODER = msgspec.msgpack.Encoder()
_PAIR, _FIXSTR = 0x92, 0xA0  # msgpack's markers of a 2-array and of a string of 0 to 31 bytes

BIG_INT = 1
"""msgpack extension code of an int beyond msgpack's 64 bits, sent as its decimal digits: the
exercise's inputs are every non-negative int, and 10**30 tokens must reach the target intact."""
_BIG_DIGITS = 4400  # Python's default limit on int <-> str conversion, with room for a sign


def encode(value: Any) -> bytes:
    """One frame holding ``value``; raises TypeError, OverflowError or UnicodeEncodeError."""
    try:
        payload = _ENCODER.encode(value)
    except OverflowError:  # an int past 64 bits somewhere: rare, so only then walk the value
        payload = _ENCODER.encode(_widened(value))
    return _HEADER.pack(len(payload)) + payload


def _widened(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if -(2**63) <= value < 2**64:
            return value
        return msgspec.msgpack.Ext(BIG_INT, str(value).encode())
    if isinstance(value, list | tuple):
        return [_widened(item) for item in value]
    if isinstance(value, dict):
        return {key: _widened(item) for key, item in value.items()}
    return value


def items(payload: bytes) -> bytes:
    """The items of a msgpack array, without the array's header: what two arrays of whose
    first items are the same values begin with alike (each item's encoding ends itself)."""
    marker = payload[0]
    if marker >> 4 == 0x9:  # fixarray
        return payload[1:]
    if marker in (0xDC, 0xDD):  # array 16, array 32
        return payload[3 if marker == 0xDC else 5 :]
    raise WireError(f"not a msgpack array: {bytes(payload[:8])!r}")


def array(count: int, items: bytes) -> bytes:
    """The msgpack array of ``count`` items already encoded as ``items``."""
    if count < 16:
        return bytes((0x90 | count,)) + items
    if count < 1 << 16:
        return b"\xdc" + struct.pack(">H", count) + items
    return b"\xdd" + struct.pack(">I", count) + items


def big_int(code: int, data: memoryview) -> int:
    """msgspec's ``ext_hook``: the one extension the wire carries, an int past 64 bits."""
    text = bytes(data)
    if code != BIG_INT or not 0 < len(text) <= _BIG_DIGITS:
        raise ValueError(f"an unknown msgpack extension (code {code}, {len(text)} bytes)")
    try:
        return int(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("a big int that is not decimal digits") from None


def frame_length(header: bytes) -> int:
    """The payload length a frame's 4-byte header announces; WireError past :data:`MAX_FRAME`."""
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise WireError(f"a frame of {length} bytes, more than the {MAX_FRAME} allowed")
    return int(length)


def split_reply(payload: bytes) -> tuple[Status, msgspec.Raw]:
    """An answer's status and its still-encoded payload; WireError if it is neither.

    The envelope is read by hand, as the host's encoder writes it (a 2-array, then the status as
    a short string): msgspec would walk the whole payload to find where it ends, and an answer is
    measured against its bound (:mod:`.bounds`) before anything walks it. The payload's reader
    then refuses whatever follows the value.
    """
    size = payload[1] - _FIXSTR if len(payload) > 2 and payload[0] == _PAIR else -1
    if not 0 <= size < 32 or len(payload) <= 2 + size:
        raise WireError(f"an answer that is not [status, payload]: {bytes(payload[:16])!r}...")
    status = payload[2 : 2 + size].decode("ascii", "replace")
    if status not in STATUSES:
        raise WireError(f"an answer with the unknown status {status!r}")
    return status, msgspec.Raw(memoryview(payload)[2 + size :])


def split_step(payload: msgspec.Raw) -> tuple[int, msgspec.Raw]:
    """A learner step's answer ``[kept, state]`` (host.py, ``_Served._step``) as its count and
    its still-encoded state, read by hand so that the state is measured on its own."""
    data = memoryview(payload)
    marker = data[1] if len(data) > 2 and data[0] == _PAIR else -1
    if 0 <= marker < 0x80:  # positive fixint
        return marker, msgspec.Raw(data[2:])
    width = {0xCC: 1, 0xCD: 2, 0xCE: 4}.get(marker, 0)
    if not width or len(data) <= 2 + width:
        raise WireError(f"a step's answer that is not [kept, state]: {bytes(data[:8])!r}...")
    return int.from_bytes(data[2 : 2 + width], "big"), msgspec.Raw(data[2 + width :])


def decoder(kind: Any) -> Callable[[msgspec.Raw], Any]:
    """A strict reader of payloads of type ``kind``; raises WireError naming what was wrong."""
    reader: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(kind, ext_hook=big_int)

    def read(raw: msgspec.Raw) -> Any:
        try:
            return reader.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise WireError(str(error)) from None
        except (TypeError, ValueError) as error:  # a dataclass's own __post_init__ refused it
            raise WireError(f"{type(error).__name__}: {error}") from None
        except RecursionError:  # msgspec stops near the interpreter's recursion limit
            raise WireError(
                "a value nested too deeply to read (hundreds of levels); plain data, the "
                "protocol's or a learner's state, nests a few levels"
            ) from None

    return read


def read_frame(fd: int) -> bytes | None:
    """The next frame's payload from a blocking ``fd``, or None at end of file (host side)."""
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    payload = _read_exactly(fd, frame_length(header))
    if payload is None:
        raise WireError("the stream ended inside a frame")
    return payload


def write_frame(fd: int, frame: bytes) -> None:
    """Write a whole encoded frame to a blocking ``fd`` (host side)."""
    view = memoryview(frame)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def printable(text: str) -> str:
    """``text`` as kvsched shows it: cut to :data:`TEXT_LIMIT` here too (the host that cut it
    runs the target's code, which can undo that) and its forbidden characters escaped
    (:func:`kvsched.spec.text.escaped`), so the target's words cannot drive a terminal nor
    break a report."""
    return words.escaped(cut(text))


def cut(text: str) -> str:
    """``text`` cut to :data:`TEXT_LIMIT` characters, saying so."""
    return words.cut(text, TEXT_LIMIT)
