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

Laziness: a request that decodes in every line taken in is counted lazily
(:mod:`.steady_lazy`): its steps are counted into the ledgers only when it finishes or a line is
declined. A line on which a request falls due (its next page boundary, or its last token) without
being named is declined; a line that names it checks it with its counts as of that line.
"""

from __future__ import annotations

import msgspec

from kvsched.checks.eventlog.ids import decode_ids
from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.steady_lazy import LazyCounts
from kvsched.checks.eventlog.steady_ops import SortedOps, sort_ops
from kvsched.checks.eventlog.steady_recent import TakenLines, Undo
from kvsched.checks.eventlog.version2 import Admit, Alloc, IterationLine
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Meter
from kvsched.spec.events import IterationEvent


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
        self.clock = 0
        """Lines taken in so far."""
        self.counts = LazyCounts(monitor, meter)
        self.lazy, self.outputs = self.counts.lazy, self.counts.outputs
        self.last_decode: tuple[str, ...] | None = None
        """The last line's decode list while its requests are exactly :attr:`lazy`."""
        self.decode_raw = msgspec.Raw(b"[]")
        self.decode_ids: tuple[str, ...] = ()
        """The last decode list read, as JSON and as ids: most lines repeat it."""
        self.taken = TakenLines()
        self.batch: tuple[str, ...] | None = None
        """The lowering's batch as a tuple, while no line has changed it since it was made."""
        self.begun = 0

    def take(self, line: IterationLine, waiting: tuple[str, ...]) -> tuple[str, ...] | None:
        """The requests ``line`` (its queue ``waiting``) finished if it is taken in; ``None`` if
        the full path is to judge it, every count then brought up to date for its lowering."""
        finished = self._take(line, waiting)
        if finished is None:
            self.flush()
        return finished

    def _take(self, line: IterationLine, waiting: tuple[str, ...]) -> tuple[str, ...] | None:
        monitor = self.monitor
        if monitor.finding is not None or line.tables is not None:
            return None
        monitor.begin(line.iteration)
        self.begun = line.iteration
        requests, pages, lazy = self.requests, self.pages, self.lazy
        state, active = requests.state, requests.active
        if line.iteration > requests.bound and not requests.drained():
            return None
        ops = sort_ops(line, state, active, pages, self.static)
        if ops is None:
            return None
        schedule, admitted, grown, fresh = ops.schedule, ops.admitted, ops.grown, ops.fresh
        computes, finishes, frees = ops.computes, ops.finishes, ops.frees
        raw = ops.decode
        if raw is None:
            decoding: tuple[str, ...] = ()
        elif raw == self.decode_raw:
            decoding = self.decode_ids
        else:
            read = decode_ids(raw)
            if read is None:
                return None  # malformed: the full path says so
            decoding, self.decode_raw, self.decode_ids = read, raw, read
        clock = self.clock + 1
        if decoding is self.last_decode:
            joiners: list[str] = []
            in_decode: dict[str, int] | set[str] = lazy
        else:
            in_decode = set(decoding)
            if len(in_decode) != len(decoding) or not in_decode.issuperset(lazy):
                return None
            # Sorted, so that the order the joiners are counted in does not follow the hash seed.
            joiners = sorted(in_decode.difference(lazy)) if len(in_decode) > len(lazy) else []
            for rid in joiners:
                if rid not in active or rid in computes:
                    return None
                if not self.counts.may_join(rid, self.lowering.tables):
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
        queued = waiting or len(requests.queue) > len(admitted)
        if batch < self.batch_limit and self.work_conserving and queued:
            return None  # BATCH-3 might apply: the full path decides
        if waiting and (waiting[0] in in_decode or waiting[0] in computes):
            return None
        if admitted and self._out_of_order(line.iteration, tuple(admitted)):
            return None
        # Everyone the line names, or who falls due now, is checked with their counts after it.
        if clock in self.counts.dues:
            for rid in self.counts.named(clock):
                if rid not in grown and rid not in finishes:
                    return None
        # LazyCounts.steady_after for the decoding requests, inlined: this runs for every page a
        # line allocates.
        kv, generated, tables, outputs = requests.kv, requests.generated, pages.tables, self.outputs
        page_size = self.page_size
        for rid in (*grown, *finishes, *joiners):
            if rid in lazy or rid in joiners:
                step = clock - lazy.get(rid, clock - 1)
                held = len(tables.get(rid, ())) + grown.get(rid, 0)
                if held != -(-(kv[rid] + step) // page_size):
                    return None
                if (generated[rid] + step == outputs[rid]) != (rid in finishes):
                    return None
        for rid, amount in computes.items():
            if not self.counts.computes(rid, amount, grown.get(rid, 0), rid in finishes):
                return None
        freed = 0
        for rid in finishes:
            table = pages.tables.get(rid, ())
            given = frees.get(rid, ())
            if len(given) != len(table) + grown.get(rid, 0):
                return None
            freed += len(given)
        for rid, given in frees.items():
            owned = set(pages.tables.get(rid, ()))
            if rid in grown:
                owned |= _pages_of(schedule, rid)
            if set(given) != owned:
                return None
        if line.free_pages != pages.usable - len(pages.holders) - len(fresh) + freed:
            return None
        self._apply(line, waiting, ops, decoding, joiners)
        return tuple(finishes)

    def _out_of_order(self, n: int, admitted: tuple[str, ...]) -> bool:
        """BATCH-4 as the monitor checks it (a pure check under fcfs and none)."""
        monitor = self.monitor
        return monitor.order.check_admitted(n, admitted, monitor.arrivals) is not None

    def _apply(
        self,
        line: IterationLine,
        waiting: tuple[str, ...],
        ops: SortedOps,
        decoding: tuple[str, ...],
        joiners: list[str],
    ) -> None:
        """Every count moved as the full path would move it for a line shown clean."""
        schedule, computes = ops.schedule, ops.computes
        finishes, frees, grown = ops.finishes, ops.frees, ops.grown
        n, requests, pages = line.iteration, self.requests, self.pages
        lowering, meter = self.lowering, self.meter
        tables = lowering.tables
        # The batch changes only by an admission or a finish: most lines reuse the last tuple.
        batch = self.batch or tuple(lowering.batch)
        self.batch = None if ops.admitted or finishes else batch
        undo: Undo = {}  # the tables the line changes, as they were before it
        joined: dict[str, None] = {}
        holders, live = pages.holders, pages.tables
        for op in schedule:
            if type(op) is Admit:
                requests.admit(n, (op.request,), joined)
                joined[op.request] = None
                lowering.batch[op.request] = None
            else:  # PageLedger.take_fresh, inlined: a line allocates about three times
                rid, given = op.request, op.pages  # type: ignore[union-attr]
                for page in given:  # type: ignore[union-attr]
                    holders[page] = {rid}
                live[rid] = live.get(rid, ()) + given  # type: ignore[operator]
                table = tables.get(rid, ())
                if rid not in undo:
                    undo[rid] = table
                tables[rid] = table + given  # type: ignore[operator]
        for rid in frees:
            if rid not in undo:
                undo[rid] = tables.get(rid, ())
        self.taken.record(line, waiting, batch, undo)
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
        # A request named here that decodes on is only due again later: its counts stay lazy.
        counts = self.counts
        if joiners or grown:
            counts.schedule((*joiners, *grown), clock, finishes)
        counts.dues.pop(clock, None)  # everyone due now was named: rescheduled or finishing
        # No page is shared in scope, so the pages held are the batch's distinct pages.
        if waiting and len(requests.active) < self.batch_limit:
            meter.count_idle(len(requests.active), waiting, lambda: len(pages.holders))
        if finishes:
            self._finish(n, finishes, frees)
        self.monitor.order.keep(waiting)
        self.last_decode = None if finishes else decoding

    def _finish(self, n: int, finishes: dict[str, None], frees: dict[str, tuple[int, ...]]) -> None:
        """The finished requests leave every ledger with their pages, brought up to date first."""
        counts, clock = self.counts, self.clock
        for rid in finishes:
            if rid in counts.lazy:
                counts.bring(rid, clock)
        self.requests.finish(n, (), tuple(finishes))
        # What PageLedger.release and drop do for pages already shown to be exactly the
        # request's own: no page is shared in scope, so each has that one holder.
        holders, live, tables = self.pages.holders, self.pages.tables, self.lowering.tables
        for given in frees.values():
            for page in given:
                del holders[page]
        for rid in finishes:
            live.pop(rid, None)
            tables.pop(rid, None)
            self.lowering.batch.pop(rid, None)
            self.meter.forget(rid)
            counts.forget(rid)

    def flush(self) -> None:
        """Bring every count up to date, and the monitor's recent events, for the full path."""
        self.counts.bring_all(self.clock)
        self.last_decode = None
        self.batch = None
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
