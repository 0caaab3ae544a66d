"""A trace's rows, read one at a time, each value checked where it stands.

The file is streamed: a row is parsed, handed on and forgotten, so reading costs the same memory
for ten rows as for ten million. A value that cannot be used stops the import with a
:class:`TraceError` naming the file, the line and the column, and what was found there.
"""

from __future__ import annotations

import csv
import datetime
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TextIO

from kvsched.spec.strict_json import parse_json_text, shown_value
from kvsched.spec.workload import WorkloadError

from .layouts import Layout


class TraceError(WorkloadError):
    """A trace row, or the file, cannot be used; the message names the file, line and column."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request as the trace states it, before any of the import's rules."""

    line: int
    seconds: Decimal | None
    """Its arrival on the trace's clock, in seconds; ``None`` where the file has no times."""
    prompt_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()


def read_rows(layout: Layout, path: Path, timed: bool, block_tokens: int) -> Iterator[TraceRow]:
    """The rows of ``path`` in file order. ``timed``: arrivals come from the file, whose time
    column must then be there; ``block_tokens``: tokens per block hash (Mooncake)."""
    try:
        stream = path.open(encoding="utf-8-sig", newline="")
    except OSError as error:
        raise TraceError(f"{path}: cannot read the trace ({error.strerror})") from None
    read = _csv_rows if layout.encoding == "csv" else _jsonl_rows
    with stream:
        try:
            yield from read(layout, path, stream, timed, block_tokens)
        except UnicodeDecodeError as bad:
            raise TraceError(
                f"{path}: not UTF-8 text ({bad.reason} at byte {bad.start} of a block read); "
                "save the file as UTF-8"
            ) from None


def _csv_rows(
    layout: Layout, path: Path, stream: TextIO, timed: bool, block_tokens: int
) -> Iterator[TraceRow]:
    reader = csv.reader(stream)
    try:
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}: the trace is empty; a header line is needed")
        columns = _columns(layout, path, [name.strip() for name in header], timed)
        time, prompt, output = columns
        for row in reader:
            if not row:  # a blank line, as a trailing newline leaves
                continue
            where = f"{path}, line {reader.line_num}"
            if len(row) != len(header):
                raise TraceError(
                    f"{where}: {len(row)} fields where the header has {len(header)}; a comma "
                    "inside a value needs the value in double quotes"
                )
            yield TraceRow(
                reader.line_num,
                _seconds(row[time], layout, where) if time >= 0 else None,
                _tokens(row[prompt], where, layout.prompt),
                _tokens(row[output], where, layout.output),
            )
    except csv.Error as error:
        raise TraceError(f"{path}, line {reader.line_num}: not CSV ({error})") from None


def _columns(layout: Layout, path: Path, names: Sequence[str], timed: bool) -> tuple[int, ...]:
    """The positions of the time, prompt and output columns (time -1: not read)."""
    if names and names[0].startswith("version https://git-lfs"):
        raise TraceError(
            f"{path}: a Git LFS pointer, not the trace; fetch the file itself (git lfs pull)"
        )
    wanted = [layout.prompt, layout.output]
    if timed or not layout.time_optional:
        wanted.insert(0, layout.time)
    for name in wanted:
        if names.count(name) != 1:
            problem = "has no column" if name not in names else "has two columns"
            hint = f"is this the {layout.name} layout?"
            if name == layout.time and layout.time_optional:
                hint = "a file of lengths only takes its arrivals from --poisson RATE"
            raise TraceError(
                f"{path}, line 1: the header {problem} '{name}' that {layout.source} has "
                f"(found: {', '.join(repr(n) for n in names[:12])}); {hint}"
            )
    time = names.index(layout.time) if layout.time in wanted else -1
    return time, names.index(layout.prompt), names.index(layout.output)


def _jsonl_rows(
    layout: Layout, path: Path, stream: TextIO, timed: bool, block_tokens: int
) -> Iterator[TraceRow]:
    for number, text in enumerate(stream, 1):
        if not text.strip():
            continue
        where = f"{path}, line {number}"
        if number == 1 and text.startswith("version https://git-lfs"):
            raise TraceError(f"{path}: a Git LFS pointer, not the trace; fetch the file itself")
        item = parse_json_text(text, where, TraceError)
        if not isinstance(item, dict):
            raise TraceError(f"{where}: a row must be a JSON object, got {shown_value(item)}")
        fields = [layout.prompt, layout.output, *([layout.time] if timed else [])]
        for name in (*fields, layout.blocks):
            if name and name not in item:
                raise TraceError(f"{where}: missing field '{name}' of the {layout.name} layout")
        prompt = _tokens(item[layout.prompt], where, layout.prompt)
        blocks = _blocks(item[layout.blocks], prompt, block_tokens, where, layout.blocks)
        yield TraceRow(
            number,
            _seconds(item[layout.time], layout, where) if timed else None,
            prompt,
            _tokens(item[layout.output], where, layout.output),
            blocks,
        )


_INTEGRAL = re.compile(r"[0-9]+(?:\.0*)?")


def _tokens(value: Any, where: str, column: str) -> int:
    """A token count: an integer >= 0 (``12.0``, as a dataframe writes 12, is 12)."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, str) and _INTEGRAL.fullmatch(value.strip()) and len(value) < 40:
        return int(value.strip().split(".")[0])
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    raise TraceError(
        f"{where}, column '{column}': a token count must be an integer >= 0, got "
        f"{shown_value(value)}"
    )


def _seconds(value: Any, layout: Layout, where: str) -> Decimal:
    """The arrival in seconds on the trace's clock, exact (no float rounding)."""
    column = f"{where}, column '{layout.time}'"
    if layout.clock == "datetime":
        return _datetime_seconds(value, column)
    try:
        number = Decimal(value.strip() if isinstance(value, str) else repr(value))
    except (InvalidOperation, TypeError):
        number = Decimal("NaN")
    if type(value) is bool or not number.is_finite():
        raise TraceError(f"{column}: an arrival time must be a number, got {shown_value(value)}")
    return number.scaleb(-3) if layout.clock == "milliseconds" else number


# Azure writes seven fractional digits (2023-11-16 18:17:03.9799600), more than strptime's %f
# takes, and its 2024 files mix times with and without them; all are read exactly.
_DATETIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?"
)


def _datetime_seconds(value: Any, column: str) -> Decimal:
    match = _DATETIME.fullmatch(value.strip()) if isinstance(value, str) else None
    try:
        if match is None:
            raise ValueError
        day = datetime.date.fromisoformat(match[1]).toordinal()
        hour, minute, second = int(match[2]), int(match[3]), int(match[4])
        if hour > 23 or minute > 59 or second > 60:
            raise ValueError
    except ValueError:
        raise TraceError(
            f"{column}: a time must read like 2023-11-16 18:17:03.9799600 (date, time, up to 9 "
            f"fractional digits, an optional UTC offset), got {shown_value(value)}"
        ) from None
    offset = 0
    if match[6] and match[6] != "Z":
        sign = -1 if match[6][0] == "-" else 1
        digits = match[6][1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    whole = day * 86400 + hour * 3600 + minute * 60 + second - offset
    return Decimal(whole) + (Decimal(f"0.{match[5]}") if match[5] else Decimal(0))


def _blocks(value: Any, prompt: int, block_tokens: int, where: str, column: str) -> tuple[int, ...]:
    """Mooncake's block hashes: one per ``block_tokens`` of the prompt, the last block partial."""
    if not isinstance(value, list) or not all(type(h) is int for h in value):
        raise TraceError(
            f"{where}, column '{column}': must be a list of integer block hashes, got "
            f"{shown_value(value)}"
        )
    expected = -(-prompt // block_tokens)
    if len(value) != expected:
        raise TraceError(
            f"{where}, column '{column}': {len(value)} block hashes for {prompt} prompt tokens, "
            f"where blocks of {block_tokens} tokens make {expected}; if the trace hashes "
            "blocks of another size, give it with --hash-block"
        )
    return tuple(value)
