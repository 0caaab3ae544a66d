"""An event log read as a stream: the header, then one event at a time, then the fault if any.

:class:`LogReader` holds only what spans lines (the next iteration number, the requests finished
so far and, for version 2, the live page tables), so checking a log of a million iterations takes
the memory of its live state. :func:`check_stream` feeds the runtime monitor as it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from kvsched.checks.eventlog.header import LogHeader, parse_header
from kvsched.checks.eventlog.ids import QueueReader, split_queue
from kvsched.checks.eventlog.lines import EventLogError, check_engine_ids
from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.source import decode_line, numbered_lines
from kvsched.checks.eventlog.version1 import IterationLine as Version1Line
from kvsched.checks.eventlog.version1 import Version1Lowering, decode_v1
from kvsched.checks.eventlog.version2 import (
    DECODER,
    IterationLine,
    Line,
    RequestLine,
    line_keys,
)
from kvsched.reference.engine import SchedulerFault
from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import Request, WorkloadError, check_fits, parse_request

Skip = Callable[[IterationLine, "tuple[str, ...] | None"], "tuple[str, ...] | None"]
"""Takes a version-2 line (and its queue, ``None`` if it names a request the log does not
know) in without an event, returning the requests it finished, or declines (None)."""
Declare = Callable[[Request], None]
"""Told of each request a request line declares, before the lines that follow it (8.7)."""

_LINE: Final = IterationLine  # a compiled static, not looked up in the module's globals per line

LATEST_ARRIVAL = 10**12
"""The latest arrival a request line may declare: a log of a long run outlives the workload
file's bound (spec/workload.py), which keeps a replayed run finite."""


class LogReader:
    """One pass over the log at ``path``: :attr:`header` at once, then :meth:`events`.

    After :meth:`events` is exhausted, :attr:`fault` holds the fault line's fault (or ``None``),
    :attr:`iterations` the number of iteration lines and :attr:`drained` whether the run ended
    with every request finished and no fault.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lines = numbered_lines(self.path)
        first = next(self._lines, None)
        if first is None:
            raise EventLogError(f"{self.path}: empty; an event log starts with a header line")
        self.header: LogHeader = parse_header(first[1], self.path)
        self.fault: SchedulerFault | None = None
        self.iterations = 0
        self._known = {r.id for r in self.header.workload.requests}
        self._unfinished = set(self._known)
        self._latest = 0  # the latest arrival a request line declared
        self._queue = QueueReader(self._known)
        self._explicit: bool | None = None  # version 1: whether lines carry 'computed'
        header = self.header
        self.lowering = (
            Lowering(header.workload, header.properties, header.pages)
            if header.version == 2
            else None
        )
        """A version-2 log's live tables and batch, which :meth:`events` builds on."""
        self._version1 = Version1Lowering()

    @property
    def drained(self) -> bool:
        return self.fault is None and not self._unfinished

    def events(
        self, skip: Skip | None = None, declare: Declare | None = None
    ) -> Iterator[IterationEvent]:
        """Every iteration's event, in order; :class:`EventLogError` at the first bad line.

        ``declare`` is told of each request a request line declares (8.7), in order, before
        the iteration lines that follow it are read.

        ``skip``, for version 2, is offered each well-formed iteration line in turn, with its
        queue (``None`` if the queue names a request the log does not know), before it is
        lowered. If it takes the line in, it returns the requests the line finished, and no
        event is made of the line."""
        lowering, queue, name = self.lowering, self._queue, str(self.path)
        for number, line in self._lines:
            if self.fault is not None:
                raise EventLogError(f"{name}: line {number}: nothing may follow the fault line")
            decoded: IterationEvent | SchedulerFault
            if lowering is None:
                where = f"{name}: line {number}"
                read_v1 = decode_v1(line, where)
                if isinstance(read_v1, Version1Line):
                    self._numbered(read_v1.iteration, where)
                    decoded = self._version1.lower(read_v1, where)
                else:
                    decoded = read_v1
            else:
                read, waiting = self._decode(line, name, number)
                # A line taken in is not wrong: its place is worded only past this point.
                if (
                    skip is not None
                    and waiting is not None
                    and type(read) is _LINE
                    and (finished := skip(read, waiting if queue.known else None)) is not None
                ):
                    self.iterations += 1
                    self._finished(finished)
                    continue
                where = f"{name}: line {number}"
                if isinstance(read, RequestLine):
                    request = self._declared(read, where)
                    if declare is not None:
                        declare(request)
                    continue
                if isinstance(read, IterationLine) and waiting is not None:
                    decoded = lowering.lower(read, waiting, where)
                else:
                    decoded = read.fault()  # type: ignore[union-attr]
            if isinstance(decoded, SchedulerFault):
                self.fault = decoded
                continue
            self._numbered(decoded.iteration, where)
            if lowering is None:
                self._all_or_nothing(decoded, where)
            check_engine_ids(decoded, self._known, where)
            self.iterations += 1
            self._finished(decoded.finished)
            yield decoded

    def _numbered(self, iteration: int, where: str) -> None:
        if iteration != self.iterations + 1:
            raise EventLogError(
                f"{where}: field 'iteration' must be {self.iterations + 1} "
                f"(iterations are numbered 1, 2, 3, ...), got {iteration}"
            )

    def _decode(self, line: bytes, name: str, number: int) -> tuple[Line, tuple[str, ...] | None]:
        """A version-2 line (line ``number`` of the log ``name``), and its queue's ids if it is
        an iteration line."""
        split = split_queue(line)
        if split is not None:
            waiting = self._queue.accept(split[1])
            if waiting is not None:
                return split[0], waiting
        where = f"{name}: line {number}"
        read = decode_line(DECODER, line, where, line_keys)
        if isinstance(read, IterationLine):
            return read, self._queue.read(read.waiting, where)
        return read, None

    def _finished(self, finished: tuple[str, ...]) -> None:
        if not finished:  # most lines: no method called for nothing
            return
        self._unfinished.difference_update(finished)
        for rid in finished:
            self._queue.forget(rid)

    def _declared(self, line: RequestLine, where: str) -> Request:
        """The request ``line`` declares, once shown new, in arrival order and not late."""
        if self.header.requests != "lines":
            raise EventLogError(
                f"{where}: a request line, but the header's workload lists every request; a "
                'log that declares its requests as they come says "requests": "lines"'
            )
        try:
            request = parse_request(line.fields(), where, LATEST_ARRIVAL)
            if not self.header.workload.allow_infeasible:  # semantics.md 1.2
                check_fits(request, self.header.workload.limits, where)
        except WorkloadError as error:
            raise EventLogError(str(error)) from None
        if request.id in self._known:
            raise EventLogError(f"{where}: field 'id': request {request.id!r} is declared twice")
        if request.arrival < max(self.iterations, self._latest):
            after = (
                f"{self.iterations} iterations were written before it"
                if request.arrival < self.iterations
                else f"a request arriving at {self._latest} was declared before it"
            )
            raise EventLogError(
                f"{where}: field 'arrival': request {request.id!r} arrives at "
                f"{request.arrival}, but {after}; requests are declared in arrival order, "
                "each before the iteration it may join (its arrival + 1, or its arrival with "
                "an 'arrive' operation)"
            )
        self._latest = request.arrival
        self._known.add(request.id)
        self._unfinished.add(request.id)
        self._queue.declare(request.id)
        return request

    def _all_or_nothing(self, event: IterationEvent, where: str) -> None:
        has_computed = event.computed is not None
        if self._explicit is None:
            self._explicit = has_computed
        required = self.header.properties.computes_explicitly
        if has_computed != self._explicit or (required and not has_computed):
            needed = "every iteration line" if self._explicit or required else "no line"
            raise EventLogError(
                f"{where}: field 'computed' must be in {needed} of this log "
                "(it is all or nothing, and required when the target declares "
                "chunked prefill, preemption or prefix sharing)"
            )
