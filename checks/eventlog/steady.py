"""Steady decoding taken in without an event: the event-log checker's fast path.

Scope: a version-2 log of page ids (spec/eventlog.md, section 8) whose target declares no
reserve-ahead allocation, no prefix sharing, no token budget, no fold restart and an admission
order of fcfs or none, up to its first finding. Within that scope :class:`SteadyDecode` takes in
a line whose schedule only admits and allocates fresh pages, whose step decodes every request of
the batch except those it computes a whole prompt for (``compute`` then ``token``), and whose
update only finishes requests and frees their whole tables, provided it can show that the line
breaks no invariant; each rule costs O(1) per request the line names. It declines every other
line: it brings every count up to date first, and the full path (the reader's lowering, the
monitor and the efficiency meter, which check every line of every log) judges the line. It never
reports a finding itself, so the findings are the full path's by construction;
tests/test_steady.py runs both paths over clean and broken logs and compares findings and
figures.

Laziness: a request that decodes in every line taken in gains one KV token and one output token
per line. Instead of counting them into the ledgers line by line, the fast path notes the number
of lines taken in (the clock) at which the request's counts were last brought up to date, and
brings them up to date when a line names it or is declined. When a request must next be named is
known in advance (its next page boundary, or its last token): a line on which a request falls
due without being named is declined.
"""

from __future__ import annotations

from kvsched.checks.eventlog.steady_ops import SortedOps, sort_ops
from kvsched.checks.eventlog.steady_recent import TakenLines
from kvsched.checks.eventlog.version2 import Admit, Alloc, IterationLine, Lowering
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Meter
from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import pages_for


class SteadyDecode:
    """Takes in the steady lines of one log (:meth:`take`) and hands the others to the full
    path (:meth:`observe`), keeping the monitor's and the meter's counts as the full path would."""

    def __init__(self, monitor: Monitor, meter: Meter, lowering: Lowering) -> None:
        self.monitor, self.meter, self.lowering = monitor, meter, lowering
        self.requests, self.pages = monitor.requests, monitor.pages
        self.page_size = monitor.limits.page_size
        self.batch_limit = monitor.limits.batch_limit
        self.static = "BATCH-2" in monitor.applicable
        self.work_conserving = (
            "BATCH-3" in monitor.applicable and not monitor.properties.estimate_admission
        )
        self.peak = monitor.properties.admission == "peak"
        # The counts a steady step moves, held here: they are read once per named request.
        self.kv, self.generated = self.requests.kv, self.requests.generated
        self.most = monitor.liveness.progress.most
        self.meter_kv, self.meter_generated = meter.kv, meter.generated
        self.meter_most = meter.most
        self.tables = self.pages.tables
        self.outputs = {rid: r.output_tokens for rid, r in self.requests.requests.items()}
        self.clock = 0
        """Lines taken in so far."""
        self.lazy: dict[str, int] = {}
        """Requests decoding in every line taken in, with the clock their counts are as of."""
        self.due: dict[str, int] = {}
        self.dues: dict[int, list[str]] = {}
        self.last_decode: tuple[str, ...] | None = None
        """The last line's decode list while its requests are exactly :attr:`lazy`."""
        self.taken = TakenLines()
        self.begun = 0

    def take(self, line: IterationLine) -> tuple[str, ...] | None:
        """The requests ``line`` finished if it is taken in; ``None`` if the full path is to
        judge it, every count then brought up to date for the lowering of the line."""
        finished = self._take(line)
        if finished is None:
            self.flush()
        return finished

    def _take(self, line: IterationLine) -> tuple[str, ...] | None:
        monitor = self.monitor
        if monitor.finding is not None or line.tables is not None:
            return None
        monitor.begin(line.iteration)
        self.begun = line.iteration
        requests, pages, lazy = self.requests, self.pages, self.lazy
        state, active = requests.state, requests.active
        if line.iteration > requests.bound and requests.finished < len(requests.requests):
            return None
        ops = sort_ops(line, state, active, pages, self.static)
        if ops is None:
            return None
        schedule, admitted, grown, fresh = ops.schedule, ops.admitted, ops.grown, ops.fresh
        decoding, computes, finishes, frees = ops.decode, ops.computes, ops.finishes, ops.frees
        clock = self.clock + 1
        if decoding == self.last_decode:
            joiners: list[str] = []
            in_decode: dict[str, int] | set[str] = lazy
        else:
            in_decode = set(decoding)
            if len(in_decode) != len(decoding) or not in_decode.issuperset(lazy):
                return None
            joiners = [r for r in decoding if r not in lazy]
            for rid in joiners:
                if rid not in active or rid in computes or not self._may_join(rid):
                    return None
        batch = len(active) + len(admitted)
        if batch == 0 or batch > self.batch_limit or len(decoding) + len(computes) != batch:
            return None
        for rid in computes:
            if rid in in_decode:
                return None
        for rid in finishes:
            if rid not in in_decode and rid not in computes:
                return None
        if self.peak and admitted:
            reserve = sum(requests.reservation(rid) for rid in admitted)
            if requests.committed + reserve > pages.usable:
                return None
        waiting = line.waiting
        queued = waiting or len(requests.queue) > len(admitted)
        if batch < self.batch_limit and self.work_conserving and queued:
            return None  # BATCH-3 might apply: the full path decides
        if waiting and (waiting[0] in in_decode or waiting[0] in computes):
            return None
        if admitted and self._out_of_order(line.iteration, tuple(admitted)):
            return None
        # Everyone the line names, or who falls due now, is checked with their counts after it.
        named = [r for r in self.dues.get(clock, ()) if self.due.get(r) == clock]
        for rid in named:
            if rid not in grown and rid not in finishes:
                return None
        for rid in (*grown, *finishes, *joiners):
            if rid in lazy or rid in joiners:
                step = clock - lazy.get(rid, clock - 1)
                if not self._steady_after(rid, step, step, grown.get(rid, 0), rid in finishes):
                    return None
        for rid, amount in computes.items():
            if not self._computes(rid, amount, grown.get(rid, 0), rid in finishes):
                return None
        freed = 0
        for rid in finishes:
            table = pages.tables.get(rid, ())
            given = frees.get(rid, ())
            if len(given) != len(table) + grown.get(rid, 0):
                return None
            freed += len(given)
        for rid, given in frees.items():
            if set(given) != set(pages.tables.get(rid, ())) | _pages_of(schedule, rid):
                return None
        if line.free_pages != pages.free - len(fresh) + freed:
            return None
        self._apply(line, ops, joiners)
        return tuple(finishes)

    def _may_join(self, rid: str) -> bool:
        """Whether a request of the batch may start decoding lazily: its counts agree in every
        ledger, and each decode step adds one KV token beyond the most it held (LIVE-3, EFF-4)."""
        requests, meter = self.requests, self.meter
        kv, generated = requests.kv[rid], requests.generated[rid]
        lag = requests.requests[rid].prompt_tokens + generated - kv
        return (
            0 <= lag <= 1
            and self.monitor.liveness.progress.most[rid] == kv
            and meter.kv[rid] == kv
            and meter.most[rid] == kv
            and meter.generated[rid] == generated
            and len(self.lowering.tables.get(rid, ())) == len(self.pages.tables.get(rid, ()))
        )

    def _steady_after(self, rid: str, kv: int, made: int, grown: int, finishes: bool) -> bool:
        """A decoding request ``kv`` KV and ``made`` output tokens further on: its pages cover
        its KV minimally (PAGE-1) and it finishes exactly at its last token (REQ-2)."""
        requests = self.requests
        held = len(self.pages.tables.get(rid, ())) + grown
        generated = requests.generated[rid] + made
        if held != pages_for(requests.kv[rid] + kv, self.page_size):
            return False
        return (generated == requests.requests[rid].output_tokens) == finishes

    def _computes(self, rid: str, amount: int, grown: int, finishes: bool) -> bool:
        """A request computing ``amount`` tokens and producing one: DEC-3 (its KV reaches the
        end of what exists), DEC-1 (and no further), then as :meth:`_steady_after`."""
        requests = self.requests
        known = requests.requests[rid].prompt_tokens + requests.generated[rid]
        kv = requests.kv[rid] + amount
        meter = self.meter
        if not known <= kv <= known + 1 or meter.kv[rid] != requests.kv[rid]:
            return False
        if meter.generated[rid] != requests.generated[rid]:
            return False
        return self._steady_after(rid, amount, 1, grown, finishes)

    def _out_of_order(self, n: int, admitted: tuple[str, ...]) -> bool:
        """BATCH-4 as the monitor checks it (a pure check under fcfs and none)."""
        event = IterationEvent(n, (), admitted, (), (), (), {}, {}, {}, 0, ())
        monitor = self.monitor
        return monitor.order.check_admissions(n, event, monitor.arrivals) is not None

    def _apply(self, line: IterationLine, ops: SortedOps, joiners: list[str]) -> None:
        """Every count moved as the full path would move it for a line shown clean."""
        schedule, decoding, computes = ops.schedule, ops.decode, ops.computes
        finishes, frees, grown = ops.finishes, ops.frees, ops.grown
        n, requests, pages = line.iteration, self.requests, self.pages
        lowering, meter = self.lowering, self.meter
        tables = lowering.tables
        self.taken.record(line, lowering, (*grown, *frees))
        joined: dict[str, None] = {}
        for op in schedule:
            if type(op) is Admit:
                requests.admit(n, (op.request,), joined)
                joined[op.request] = None
                lowering.batch[op.request] = None
            else:
                given = op.pages  # type: ignore[union-attr]
                pages.take_fresh(op.request, given)  # type: ignore[arg-type]
                tables[op.request] = tables.get(op.request, ()) + given  # type: ignore[operator]
        self.clock = clock = self.clock + 1
        lazy = self.lazy
        for rid in joiners:
            lazy[rid] = clock - 1
        progress = self.monitor.liveness.progress
        progress.value += 2 * len(decoding) + len(computes)
        kv, generated, most = requests.kv, requests.generated, progress.most
        for rid, amount in computes.items():
            kv[rid] += amount
            generated[rid] += 1
            if kv[rid] > most[rid]:
                progress.value += kv[rid] - most[rid]
                most[rid] = kv[rid]
            before = meter.kv[rid]
            meter.recomputed += max(0, min(amount, meter.most[rid] - before))
            meter.kv[rid] = before + amount
            meter.generated[rid] += 1
            meter.most[rid] = max(meter.most[rid], meter.kv[rid])
        for rid in (*joiners, *grown, *finishes):
            if rid in lazy:
                self._bring(rid, clock)
        for rid in self.dues.pop(clock, ()):
            if self.due.get(rid) == clock and rid in lazy and rid not in finishes:
                self._bring(rid, clock)
        # No page is shared in scope, so the pages held are the batch's distinct pages.
        meter.count_idle(len(requests.active), line.waiting, lambda: len(pages.holders))
        if finishes:
            event = IterationEvent(n, (), (), (), (), tuple(finishes), {}, {}, {}, 0, ())
            requests.finish(n, event)
            for rid, given in frees.items():
                pages.release(n, rid, given, "finished")
            for rid in finishes:
                pages.drop(n, rid, "finished")
                tables.pop(rid, None)
                lowering.batch.pop(rid, None)
                meter.kv.pop(rid, None)
                lazy.pop(rid, None)
                self.due.pop(rid, None)
        self.monitor.order.keep(line.waiting)
        self.last_decode = None if finishes else decoding

    def _bring(self, rid: str, clock: int) -> None:
        """Count ``rid``'s steady steps into every ledger, and note when it next falls due."""
        steps = clock - self.lazy[rid]
        kv = self.kv
        if steps:
            kv[rid] += steps
            self.generated[rid] += steps
            self.most[rid] = kv[rid]
            meter_kv = self.meter_kv
            meter_kv[rid] += steps
            self.meter_generated[rid] += steps
            self.meter_most[rid] = meter_kv[rid]
        self.lazy[rid] = clock
        boundary = len(self.tables.get(rid, ())) * self.page_size - kv[rid] + 1
        due = clock + min(boundary, self.outputs[rid] - self.generated[rid])
        self.due[rid] = due
        if due in self.dues:
            self.dues[due].append(rid)
        else:
            self.dues[due] = [rid]

    def flush(self) -> None:
        """Bring every count up to date, and the monitor's recent events, for the full path."""
        for rid in list(self.lazy):
            self._bring(rid, self.clock)
        self.lazy.clear()
        self.due.clear()
        self.dues.clear()
        self.last_decode = None
        self.monitor.recent.extend(self.taken.replay(self.lowering))

    def observe(self, event: IterationEvent) -> Finding | None:
        """The full path for a line :meth:`take` declined (or was not offered)."""
        self.flush()
        self.meter.observe(event)
        if self.begun == event.iteration:
            return self.monitor.judge(event)
        return self.monitor.observe(event)


def _pages_of(schedule: list[Admit | Alloc], rid: str) -> set[int]:
    return {p for op in schedule if type(op) is Alloc and op.request == rid for p in op.pages}  # type: ignore[union-attr]
