"""Reading JSON strictly, for every file kvsched reads: workloads and event logs.

Python's ``json`` module is lenient where a hostile or broken file can exploit it: a key given
twice keeps its last value silently, bytes that are not UTF-8 and nesting deeper than the
interpreter's stack raise exceptions that are not ``JSONDecodeError``, and a number of thousands of
digits raises ``ValueError``. Here each of those is the caller's own error type, with the place
named, so a malformed file is invalid input (exit 2) and never a traceback.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def decode_json(data: bytes, source: str, error: type[ValueError]) -> Any:
    """The JSON document in ``data``, strictly: UTF-8, no repeated keys, nesting Python can read.

    Anything else raises ``error`` with the place named, so a malformed file is invalid input and
    never a traceback. Shared with the event-log reader, which raises its own error type.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = data[: bad.start].count(b"\n") + 1
        raise error(
            f"{source}: not UTF-8 text (line {line}, byte {bad.start}: {bad.reason}); save the "
            "file as UTF-8"
        ) from None
    return parse_json_text(text, source, error)


def parse_json_text(text: str, source: str, error: type[ValueError]) -> Any:
    """The JSON document ``text``, with the strictness of :func:`decode_json`."""
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as bad:
        raise error(
            f"{source}: not valid JSON (line {bad.lineno}, column {bad.colno}: {bad.msg})"
        ) from None
    except _RepeatedKey as repeated:
        raise error(
            f"{source}: the key '{repeated.args[0]}' appears twice in one object; JSON readers "
            "disagree on which one counts, so keep one"
        ) from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply to be a workload or an event") from None
    except ValueError as bad:  # a number of more digits than Python converts
        raise error(f"{source}: a value cannot be read ({bad})") from None
    if _SURROGATE_ESCAPE.search(text):  # rare: only then is the whole document looked through
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise error(
                f"{source}: a string holds a lone surrogate (a \\ud800-\\udfff escape without "
                "its pair), which is not text; write the character itself or its full pair"
            ) from None
    return document


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key[:60])
            seen.add(key)
    return document


def is_text(value: Any) -> bool:
    """A string that can be printed and written back as UTF-8 (no lone surrogates)."""
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_value(value: Any) -> str:
    """A value for an error message: short, and printable whatever it holds."""
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of {len(str(value))} digits"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return text.encode("ascii", "backslashreplace").decode("ascii")


def json_kind(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages ("integer", "array", ...)."""
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
