"""Writing event logs of version 2, line by line, plain or gzip (spec/eventlog.md, section 8).

:class:`LogWriter` is what a recorder holds while an engine runs: it writes the header at once and
each iteration as it ends, so a recording of any length takes constant memory. Lines come out in
the canonical form the reader decodes fastest: compact, fields in schema order. :func:`v2_lines`
turns a run of the reference engine (events in version 1's fixed order) into the same lines.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, deque
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from kvsched.checks.eventlog.lines import LOG_FORMAT
from kvsched.checks.eventlog.version1 import FaultLine
from kvsched.checks.eventlog.version2 import (
    ENCODER,
    Admit,
    Alloc,
    Arrive,
    Cache,
    Compute,
    Decode,
    Finish,
    Free,
    IterationLine,
    Operation,
    PageMode,
    Preempt,
    RequestMode,
    Share,
    Slot,
    Token,
    Unslot,
    ids_json,
    queue_json,
)
from kvsched.reference.engine import Run, SchedulerFault
from kvsched.spec.events import IterationEvent, Op
from kvsched.spec.properties import TargetProperties, properties_to_json
from kvsched.spec.request_fields import optional_json
from kvsched.spec.vocabulary import assert_never
from kvsched.spec.workload import Request, Workload, arrival_order, workload_to_json


def header_line(
    workload: Workload,
    properties: TargetProperties,
    pages: PageMode = "ids",
    requests: RequestMode = "header",
) -> str:
    """The header; with ``requests="lines"`` it lists no request of ``workload``, and each is
    to be declared by :func:`request_line` before the iteration it may join (8.7)."""
    document = workload_to_json(workload)
    header = {
        "type": "header",
        "format": LOG_FORMAT,
        "version": 2,
        "workload": document | {"requests": []} if requests == "lines" else document,
        "target": properties_to_json(properties),
    }
    if pages != "ids":
        header["pages"] = pages
    if requests != "header":
        header["requests"] = requests
    return json.dumps(header, separators=(",", ":"))


def request_line(request: Request) -> bytes:
    """The line that declares ``request`` in a log whose requests come in lines (8.7)."""
    line = {
        "type": "request",
        "id": request.id,
        "arrival": request.arrival,
        "prompt_tokens": request.prompt_tokens,
        "output_tokens": request.output_tokens,
        **optional_json(request.prefix_group, request.prefix_tokens, request.priority),
    }
    return json.dumps(line, separators=(",", ":")).encode()


class LogWriter:
    """A version-2 log being written; gzip when ``path`` ends in ``.gz``. Use as a context."""

    def __init__(
        self,
        path: str | Path,
        workload: Workload,
        properties: TargetProperties,
        pages: PageMode = "ids",
    ) -> None:
        if not properties.policy:
            raise ValueError("a log declares the policy its target implements: set 'policy'")
        path = Path(path)
        # Held open across calls, closed by close() or the with block.
        self._raw = path.open("wb")
        self._file: BinaryIO | gzip.GzipFile = self._raw
        if path.suffix == ".gz":
            self._file = gzip.GzipFile(fileobj=self._raw, mode="wb")
        self._file.write(header_line(workload, properties, pages).encode() + b"\n")
        self.iterations = 0

    def iteration(
        self,
        ops: list[Operation],
        free_pages: int,
        waiting: tuple[str, ...] = (),
        tables: dict[str, tuple[int, ...]] | None = None,
    ) -> None:
        """The next iteration's operations, in the order the engine did them."""
        self.iterations += 1
        line = IterationLine(self.iterations, tuple(ops), free_pages, queue_json(waiting), tables)
        self._file.write(ENCODER.encode(line) + b"\n")

    def fault(self, fault: SchedulerFault) -> None:
        line = FaultLine(fault.iteration, fault.call, fault.message)
        self._file.write(ENCODER.encode(line) + b"\n")

    def close(self) -> None:
        self._file.close()  # a GzipFile writes its trailer but leaves its file open
        self._raw.close()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def v2_lines(
    run: Run, properties: TargetProperties, requests: RequestMode = "header"
) -> Iterator[str]:
    """The version-2 lines of a run whose events follow version 1's order, without newlines.
    With ``requests="lines"`` each request is declared before the iteration of its arrival time
    (the first, for time 0), and those that never arrived before the end."""
    yield header_line(run.workload, properties, requests=requests)
    prompts = {r.id: r.prompt_tokens for r in run.workload.requests}
    coming = deque(arrival_order(run.workload.requests) if requests == "lines" else ())
    held: Mapping[str, int] = {}  # state slot holders after the last line (state_slots)
    for event in run.events:
        while coming and max(1, coming[0].arrival) <= event.iteration:
            yield request_line(coming.popleft()).decode()
        ops = tuple(ops_of(event, prompts))
        if event.slots is not None:
            ops, held = _with_slots(ops, held, event)
        waiting = queue_json(tuple(event.waiting))
        # Version 2 has no operation for pages that left a table unfreed: a snapshot of the
        # tables shows them, and a reader refuses the line whose operations disagree with it.
        lost = any(op.kind == "lose" for op in event.schedule)
        tables = dict(event.page_tables) if lost else None
        line = IterationLine(
            event.iteration, ops, event.free_pages, waiting, tables, event.free_slots
        )
        yield ENCODER.encode(line).decode()
    yield from (request_line(request).decode() for request in coming)
    if run.fault is not None:
        fault = run.fault
        yield ENCODER.encode(FaultLine(fault.iteration, fault.call, fault.message)).decode()


def _with_slots(
    ops: tuple[Operation, ...], held: Mapping[str, int], event: IterationEvent
) -> tuple[tuple[Operation, ...], Mapping[str, int]]:
    """``ops`` with the slots taken and given back: at the end of the schedule, what changed
    from ``held`` (the holders after the line before) to the holders after the schedule, and
    at the end of the line, what changed from those to the holders after the update. Also the
    holders after the update, for the next line."""
    scheduled = sum(1 for op in event.schedule if op.kind != "lose")
    after_schedule = event.slots or {}
    after_update = event.slots_after or {}
    moved = (
        *ops[:scheduled],
        *_slot_moves(held, after_schedule),
        *ops[scheduled:],
        *_slot_moves(after_schedule, after_update),
    )
    return moved, after_update


def _slot_moves(before: Mapping[str, int], after: Mapping[str, int]) -> list[Operation]:
    """The ``unslot`` and ``slot`` operations that take holders ``before`` to ``after``."""
    moves: list[Operation] = [
        Unslot(rid, slot) for rid, slot in before.items() if after.get(rid) != slot
    ]
    moves += (Slot(rid, slot) for rid, slot in after.items() if before.get(rid) != slot)
    return moves


def _scheduled(op: Op) -> Operation | None:
    """One operation of an event's schedule as a line writes it; ``None`` for a ``lose``, which
    no engine does (the line's table snapshot shows it)."""
    match op.kind:
        case "arrive":
            return Arrive(op.request)
        case "preempt":
            return Preempt(op.request)
        case "admit":
            return Admit(op.request)
        case "free":
            return Free(op.request, op.pages)
        case "share":
            return Share(op.request, op.pages)
        case "alloc":
            return Alloc(op.request, op.pages)
        case "lose":
            return None
        case _:
            assert_never(op.kind)


def ops_of(event: IterationEvent, prompts: Mapping[str, int]) -> Iterator[Operation]:
    """An event as operations: its schedule, its step, then its finishes and frees. Without
    ``computed`` (the lesson model) an admission computes the prompt and every token one
    position."""
    for op in event.schedule:
        if (written := _scheduled(op)) is not None:
            yield written
    for rid, hit in event.cached.items():
        yield Cache(rid, hit)
    computed = event.computed
    if computed is None:
        lesson = Counter(event.decoded)
        for rid in event.admitted:
            lesson[rid] += prompts[rid]
        computed = lesson
    tokens = Counter(event.decoded)
    decodes = tuple(rid for rid, n in computed.items() if n == 1 and tokens[rid] == 1)
    decoding = set(decodes)
    if decodes:
        yield Decode(ids_json(decodes))
    for rid, n in computed.items():
        if not (n == 1 and tokens[rid] == 1):
            yield Compute(rid, n)
    for rid in event.decoded:
        if rid not in decoding:
            yield Token(rid)
    for rid in event.finished:
        yield Finish(rid)
    for rid, pages in event.freed.items():
        if pages:
            yield Free(rid, tuple(pages))
