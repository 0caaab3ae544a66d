"""The bytes of an event log, one numbered line at a time, and one line decoded with msgspec.

A log is read as a stream, plain or gzip (told by its first two bytes, not by its name), so the
memory a check takes follows the run's live state, never the log's length. It may be a file or a
pipe (an engine's output on standard input, a named pipe, a shell's ``<(...)``), read as it
comes. Each line is decoded by msgspec straight into a typed struct, which validates it in the
same pass; the text of an error is built only when a line is wrong.

JSON lets an object repeat a key, and a decoder keeps the last value; a log that says two things
at once is malformed here. msgspec gives no hook for that, so :func:`decode_line` either counts
the line's keys (when the caller can say how many the decoded value has) or re-encodes what it
decoded: a line that is no longer than its canonical encoding (spaces aside) can hold no repeated
key, since every other difference (escapes, other whitespace) makes a line longer. Only the rare
line that fails is parsed again by :mod:`json`, which names the repeated key.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec

from kvsched.checks.eventlog.lines import EventLogError
from kvsched.spec.strict_json import decode_json

_BROKEN_STREAM: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)
"""What reading a broken or truncated gzip stream raises."""
try:  # python-isal inflates a log about three times as fast as the standard library
    from isal import igzip as gzip
    from isal.isal_zlib import error as isal_error

    # A class, though python-isal's stub declares an instance of one.
    _BROKEN_STREAM += (cast("type[BaseException]", isal_error),)
except ImportError:  # a platform without its wheel
    import gzip  # type: ignore[no-redef]

T = TypeVar("T")

_GZIP_MAGIC = b"\x1f\x8b"
_BUFFER = 1 << 20
"""Bytes read at a time: with the default 8 KiB, reading the lines of a log costs four times as
much (a read per few lines)."""
_ENCODER = msgspec.json.Encoder()
_GENERIC = msgspec.json.Decoder()


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The lines of the log at ``path``, numbered from 1, without their line ends."""
    try:
        raw = io.BufferedReader(io.FileIO(path, "rb"), _BUFFER)
    except OSError as error:
        raise EventLogError(f"{path}: cannot read the event log ({error.strerror})") from None
    number = 0
    with raw:
        # Peeked, not read and sought back: a log may come down a pipe, which cannot seek.
        compressed = raw.peek(2)[:2] == _GZIP_MAGIC
        stream: Iterable[bytes] = raw
        if compressed:
            stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[no-untyped-call]
        try:
            for number, line in enumerate(stream, start=1):
                # A line holds one line feed, at its end: before it, no carriage return on most
                # lines, whose line feed is cut off by a compiled slice, not a method call.
                if line.endswith(b"\n") and not line.endswith(b"\r\n"):
                    yield number, line[:-1]
                else:
                    yield number, line.rstrip(b"\r\n")
        except _BROKEN_STREAM as error:
            what = "a broken or truncated gzip stream" if compressed else str(error)
            raise EventLogError(f"{path}: line {number + 1}: cannot read ({what})") from None


def decode_line(
    decoder: msgspec.json.Decoder[T],
    line: bytes,
    where: str,
    keys: Callable[[T], int | None] | None = None,
) -> T:
    """``line`` decoded into the decoder's type; :class:`EventLogError` naming the field if not.

    ``keys``, if given, tells how many keys the decoded value's JSON holds when none repeats
    (``None``: it cannot tell). Every key is followed by a colon, so a line with no more colons
    than that repeats none. Otherwise a compact line shows a repeated key by its count of ``":``:
    each key ends so once, and anything else that does is inside a string, so a line with a
    repeated key counts more. A line with a space before a colon is checked the slow way."""
    try:
        value = decoder.decode(line)
    except msgspec.ValidationError as error:
        raise EventLogError(f"{where}: {validation_message(str(error))}") from None
    except msgspec.DecodeError as error:
        raise EventLogError(f"{where}: {json_problem(line, str(error))}") from None
    except RecursionError:
        raise EventLogError(f"{where}: not valid JSON (nested too deeply)") from None
    expected = keys(value) if keys is not None else None
    if expected is not None:
        # One scan settles a line with no colon in its strings; else count the key ends.
        if line.count(b":") != expected and (_spaced_colon(line) or line.count(b'":') != expected):
            reject_repeated_keys(line, where)
        return value
    encoded = _ENCODER.encode(value)
    if len(line) - line.count(b" ") > len(encoded) - encoded.count(b" "):
        reject_repeated_keys(line, where)
    return value


def strict_json(line: bytes, where: str) -> Any:
    """``line`` parsed strictly (spec/strict_json.py): for the header, and for precise messages
    about a line msgspec refused.

    A header can list tens of thousands of requests, and :mod:`json` calls back into Python for
    every object to find a repeated key. msgspec reads the line first: if the line has as many
    key ends (``":``) as the objects it decoded hold keys, and no whitespace before a colon,
    no key repeats (see :func:`decode_line`). A line with a ``\\u`` escape, which the two
    read differently for a lone surrogate, and any line msgspec refuses or miscounts, is read by
    :mod:`json`, which also words what is wrong."""
    if b"\\u" not in line and not _spaced_colon(line):
        try:
            document = _GENERIC.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass
        else:
            if line.count(b'":') == _keys(document):
                return document
    return decode_json(line, where, EventLogError)


def _spaced_colon(line: bytes) -> bool:
    """Whether JSON whitespace comes before a colon (a line holds no line end)."""
    return b" :" in line or b"\t:" in line or b"\r:" in line


def _keys(value: Any) -> int:
    """How many keys the objects in a decoded JSON value hold, nested ones included."""
    keys = 0
    nested: list[Any] = [value]
    while nested:
        item = nested.pop()
        if type(item) is dict:
            keys += len(item)
            nested.extend(v for v in item.values() if type(v) is dict or type(v) is list)
        elif type(item) is list:
            nested.extend(v for v in item if type(v) is dict or type(v) is list)
    return keys


def reject_repeated_keys(line: bytes, where: str) -> None:
    strict_json(line, where)


def json_problem(line: bytes, message: str) -> str:
    """Why ``line`` is not JSON, in the words of :mod:`json` when it can say (with a column)."""
    try:
        strict_json(line, "")
    except EventLogError as error:
        return str(error)[2:]  # strict_json's message without the empty location
    return f"not valid JSON ({message})"


def validation_message(message: str) -> str:
    """msgspec's message, with its JSON path as the field a reader looks for.

    ``Expected `int`, got `str` - at `$.pages[0]``` reads ``field 'pages[0]': expected int, got
    str``; an unknown or missing field is named the same way.
    """
    text, _, path = message.partition(" - at `")
    text = text.replace("`", "'")
    if path:
        field = path.rstrip("`").removeprefix("$").removeprefix(".")
        field = field.replace("key` in `$.", "key in ").replace("key` in `$", "key in ")
        if field:
            return f"field '{field}': {text[:1].lower()}{text[1:]}"
    for prefix in ("Object missing required field ", "Object contains unknown field "):
        if text.startswith(prefix):
            name = text.removeprefix(prefix)
            what = "missing field" if "missing" in prefix else "unknown field"
            return f"{what} {name}"
    return text[:1].lower() + text[1:]
