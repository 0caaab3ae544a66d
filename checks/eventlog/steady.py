"""Steady decoding taken in without an event: the event-log checker's fast path.

Scope: a version-2 log of page ids (spec/eventlog.md, section 8) whose declarations every check
admits (each check's ``Steady.log``, checks/monitor/checklist*.py), up to its first finding. On
each line, every check's own predicate (``Steady.line``) says whether it has work there: the
limits, the budget, the order, an idle slot, the bound, the queue and the free count are judged
there, never here. :class:`SteadyDecode` takes in a line whose schedule only preempts
requests of the batch (each giving back its whole table before anything else is scheduled),
admits and allocates fresh pages, whose step decodes the batch or computes prompts or chunks of
them, and whose update only finishes requests and frees their tables. A preemption moves the
ledgers by the calls the full path makes for it (:meth:`SteadyDecode._preempt`). It declines
every other line, bringing every count up to date first for the full path (the lowering, the
monitor and the meter). It never reports a finding, so the findings are the full path's by
construction; tests/cover/test_steady.py, tests/cover/test_steady_lazy.py and
tests/cover/test_planted_logs.py compare the two paths.

Laziness: a request that decodes in every line taken in is counted lazily (:mod:`.steady_lazy`):
its steps reach the ledgers only when a line is declined (one that finishes first is forgotten
uncounted), and one that only decodes in a declined line the full path finds clean stays lazy
after it. A line on which a request falls due (its next page boundary, or its last token)
must name it, and is checked with its counts as of that line. Who holds which page reaches the
page ledger only when a line is declined, too (:mod:`.steady_pages`).
"""

from __future__ import annotations

from kvsched.checks.eventlog.ids import DecodeList
from kvsched.checks.eventlog.lowering import Lowering
from kvsched.checks.eventlog.steady_lazy import LazyCounts
from kvsched.checks.eventlog.steady_ops import LineOps, sort_ops
from kvsched.checks.eventlog.steady_pages import DeferredPages, SharedPages
from kvsched.checks.eventlog.steady_recent import TakenLines, Undo
from kvsched.checks.eventlog.version2 import IterationLine
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import (
    AllocationCheck,
    FreesPredicate,
    LinePredicate,
    iteration_plan,
)
from kvsched.checks.monitor.runtime import Monitor
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.reference.efficiency import Meter
from kvsched.spec.events import IterationEvent


class SteadyDecode:
    """Takes in the steady lines of one log (:meth:`take`) and hands the others to the full
    path (:meth:`observe`), keeping the monitor's and the meter's counts as the full path would."""

    def __init__(self, monitor: Monitor, meter: Meter, lowering: Lowering) -> None:
        self.monitor, self.meter, self.lowering = monitor, meter, lowering
        self.requests, self.ledger = monitor.requests, monitor.pages
        self.page_size = monitor.limits.page_size
        self.batch_limit = monitor.limits.batch_limit
        self.usable = monitor.pages.usable
        self.predicates: tuple[LinePredicate, ...] = tuple(
            check.steady.line
            for check in iteration_plan()
            if check.steady is not None and check.steady.line is not None
        )  # each check's say in whether a steady line may go without it
        self.on_allocations: tuple[AllocationCheck, ...] = tuple(
            check.steady.allocations
            for check in iteration_plan()
            if check.steady is not None and check.steady.allocations is not None
        )  # the checks that judge every allocation, from the allocations alone
        self.on_frees: tuple[FreesPredicate, ...] = tuple(
            check.steady.frees
            for check in iteration_plan()
            if check.steady is not None and check.steady.frees is not None
        )  # each check's say in what a steady line's finished requests give back
        self.clock = 0
        """The lazy counts' clock: lines taken in, and lines the full path judged, so far."""
        self.fast_lines = 0
        """Lines taken in so far."""
        self.counts = LazyCounts(monitor, lowering.tables)
        self.lazy = self.counts.lazy
        shared = monitor.properties.prefix_sharing
        self.pages = (SharedPages if shared else DeferredPages)(monitor.pages, lowering.tables)
        self.last_decode: tuple[str, ...] | None = None
        """The last line's decode list while its requests are exactly :attr:`lazy`."""
        self.decode = DecodeList()
        """The last decode list read: most lines repeat it, or change it a little."""
        self.left: dict[str, None] | None = None
        """The requests the last line taken in finished: they leave the next decode list.
        ``None`` after a line the full path judged, which may have taken out any."""
        self.taken = TakenLines()
        self.batch: tuple[str, ...] | None = None
        """The lowering's batch as a tuple, while no line has changed it since it was made."""
        self.begun = 0
        self.declined = False
        """Whether :meth:`take` declined the line :meth:`observe` is to judge: the lazy set
        may be carried across it (:meth:`observe`)."""

    def take(self, line: IterationLine, waiting: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The requests ``line`` (its queue ``waiting``, ``None`` if it names a request the
        log does not know) finished if it is taken in; ``None`` if the full path is to judge it,
        every count then brought up to date for its lowering."""
        finished = None if waiting is None else self._take(line, waiting)
        if finished is None:
            self.declined = True
            self.flush()
        return finished

    def _take(self, line: IterationLine, waiting: tuple[str, ...]) -> tuple[str, ...] | None:
        monitor = self.monitor
        if monitor.finding is not None or line.tables is not None:
            return None
        if line.iteration != monitor.iteration + 1:
            return None  # misnumbered: the reader says so
        monitor.begin(line.iteration)
        self.begun = line.iteration
        requests, lazy = self.requests, self.lazy
        active = requests.active
        ops = sort_ops(line, requests.live, active, self.ledger)
        if ops is None:
            return None
        admitted, grown, fresh, raw, computes, finishes, frees = (
            ops.admitted,
            ops.grown,
            ops.fresh,
            ops.decode,
            ops.computes,
            ops.finishes,
            ops.frees,
        )
        victims = ops.preempted
        left = self.left
        released: set[int] = set()
        if victims:
            freed_early = self._released(ops)
            if freed_early is None:
                return None
            released = freed_early
            if left is not None:  # the preempted leave the decode list too
                left = {**left, **victims}
        if fresh and not self.pages.all_free(fresh - released if released else fresh):
            return None
        if raw is None:
            decoding: tuple[str, ...] = ()
            members: set[str] = set()
        else:
            if not self.decode.read(raw, left, active):
                return None  # malformed: the full path says so
            decoding, members = self.decode.ids, self.decode.members
        clock = self.clock + 1
        if decoding is self.last_decode:
            joiners: list[str] = []
            in_decode: dict[str, int] | set[str] = lazy
        else:
            in_decode = members
            if len(in_decode) != len(decoding):
                return None
            # That every lazy request decodes follows from the counts below: the batch is the
            # requests that decode and those that compute, and no lazy request computes.
            joiners = [rid for rid in decoding if rid not in lazy]
            joiners.sort()  # counted in the same order whatever order the line gives
            for rid in joiners:
                if rid not in active or rid in computes:
                    return None
                if not self.counts.may_join(rid, self.pages.changed):
                    return None
        for rid in victims:  # out of the batch for the rest of the line
            if rid in in_decode or rid in computes or rid in finishes:
                return None
        batch = len(active) + len(admitted) - len(victims)
        # The shape lazy counting needs (a request of the batch that does neither is counted
        # by the full path), not a rule: who may be left out is BATCH-6's to judge.
        if len(decoding) + len(computes) != batch:
            return None
        for rid in computes:
            if rid in in_decode or rid in lazy:
                return None
        for rid in finishes:
            if rid not in in_decode and rid not in computes:
                return None
        if waiting and (waiting[0] in in_decode or waiting[0] in computes):
            return None
        # Everyone the line names, or who falls due now, is checked with their counts after it.
        due_now = self.counts.dues.get(clock)
        if due_now:
            due = self.counts.due
            for rid in due_now:
                if due.get(rid) != clock or rid in grown or rid in finishes or rid in victims:
                    continue  # named, or leaving the batch: no step of its is due
                return None
        named = self.counts.named(clock, grown, finishes, joiners, computes, ops)
        if named is None:
            return None
        freed = 0
        if finishes:
            tables = self.lowering.tables
            ended = {rid: tables.get(rid, ()) + ops.gained.get(rid, ()) for rid in finishes}
            for may_skip_frees in self.on_frees:
                if not may_skip_frees(frees, ended):
                    return None  # a check has work on what they gave back
            for given in frees.values():
                freed += len(given)
        joining = tuple(admitted)
        if released:
            for given in frees.values():
                if not released.isdisjoint(given):
                    return None  # a page two give back: the full path counts its holders
        scheduled, held = self.pages.held_after(fresh, ops.shared, frees, freed, len(released))
        if waiting:
            head: str | None = waiting[0]
        elif victims and monitor.properties.requeue == "head":
            head = next(reversed(victims))  # the latest preempted stands first
        else:
            head = next((rid for rid in requests.queue if rid not in admitted), None)
        steady = SteadyLine(
            line.iteration,
            joining,
            batch,
            sum(requests.reservation(rid) for rid in joining) if joining else 0,
            bool(waiting) or len(requests.queue) + len(victims) > len(joining),
            line.free_pages,
            held,
            len(waiting),
            len(requests.queue) - len(joining) + len(victims),
            len(decoding) + sum(computes.values()),
            len(decoding) + len(computes),
            len(computes) - len(ops.tokens),
            scheduled,
            head if head in requests.live else None,  # a reported head that finished waits not
            waiting,
            tuple(victims),
            len(decoding) + len(ops.tokens),
        )
        for may_skip in self.predicates:
            if not may_skip(monitor, steady):
                return None  # a check has work on this line: the full path runs it
        gained = ops.gained
        if gained and self.on_allocations:
            before = self.lowering.tables
            after = {rid: before.get(rid, ()) + pages for rid, pages in gained.items()}
            n, shared, cached = line.iteration, ops.shared, ops.cached
            for judge in self.on_allocations:
                if judge(monitor, n, gained, after, shared, cached) is not None:
                    return None  # the full path judges the line, and says what is wrong
        self._apply(line, waiting, ops, decoding, joiners, named)
        return tuple(finishes)

    def _preempt(self, n: int, ops: LineOps, before: Undo) -> None:
        """The line's preemptions, first in its schedule, moved by the calls the full path makes
        (PrefixContent.release for PAGE-6, RequestLedger.preempt, OrderRules.waiting); each
        preempted request's table goes into ``before``, to be put back to undo the line."""
        monitor, requests, tables = self.monitor, self.requests, self.lowering.tables
        records = requests.records
        for rid in ops.preempted:
            self.counts.leave(rid, self.clock)  # its lazy steps counted in, before its KV is lost
            table = tables.pop(rid, ())
            before[rid] = table
            monitor.prefix.release(records.live[rid], table)  # what its pages hold (PAGE-6)
            if requests.preempt(n, rid) is not None:  # declared, and of the batch: _take saw
                raise AssertionError(f"the fast path preempted {rid!r}, which the ledger refuses")
            monitor.order.waiting(rid, n, True)
            self.lowering.batch.pop(rid, None)
            self.pages.give_back(rid, ops.released.get(rid, ()))
        self.meter.preemptions += len(ops.preempted)

    def _released(self, ops: LineOps) -> set[int] | None:
        """The pages free once the line's preempted requests gave theirs back, if each gave back
        its whole table, each page once (PAGE-3, PAGE-4); ``None`` if not: the full path says
        what is wrong."""
        tables = self.lowering.tables
        given = ops.released
        for rid in ops.preempted:
            table = tables.get(rid, ())
            pages = given.get(rid, ())
            distinct = set(pages)
            if len(distinct) != len(pages) or len(pages) != len(table):
                return None
            if pages != table and distinct != set(table):
                return None
        return self.pages.released(given)

    def _apply(
        self,
        line: IterationLine,
        waiting: tuple[str, ...],
        ops: LineOps,
        decoding: tuple[str, ...],
        joiners: list[str],
        named: dict[str, int],
    ) -> None:
        """Every count moved as the full path would move it for a line shown clean."""
        admitted, grown, computes, finishes, frees = (
            ops.admitted,
            ops.grown,
            ops.computes,
            ops.finishes,
            ops.frees,
        )
        requests, lowering, meter = self.requests, self.lowering, self.meter
        tables = lowering.tables
        victims = ops.preempted
        # The batch changes only by an admission, a preemption or a finish: most lines reuse
        # the last tuple.
        batch = self.batch or tuple(lowering.batch)
        self.batch = None if admitted or finishes or victims else batch
        # What undoing the line needs beyond its allocations: the tables it ended or began.
        before: Undo = {rid: tables.get(rid) for rid in finishes} if finishes else {}
        if victims:
            self._preempt(line.iteration, ops, before)
        self.taken.record(line, waiting, batch, before)
        for rid in admitted:
            requests.join(rid, line.iteration)
            lowering.batch[rid] = None
        for op in ops.allocs:
            rid = op.request
            table = tables.get(rid)
            if table is None:
                table = before.setdefault(rid, None) or ()
            tables[rid] = table + op.pages  # type: ignore[operator]
        if grown:
            if ops.shared:  # most lines share nothing: no call, no bound method made
                self.pages.share(ops.shared)
            self.pages.take(grown, ops.fresh)
        self.clock = clock = self.clock + 1
        self.fast_lines += 1
        lazy = self.lazy
        for rid in joiners:
            lazy[rid] = clock - 1
        records = requests.records
        if computes:  # prompts, chunks and their tokens: counted as the full path counts them
            records.count(computes, ops.cached, tuple(ops.tokens))
        records.steady_progress(len(decoding))
        if victims:  # each preemption noted where the progress stood as the line began (LIVE-3)
            for rid in victims:
                if records.preempted_again(rid):  # LIVE-3's predicate saw progress
                    raise AssertionError(f"the fast path took in {rid!r}'s thrash")
        # A request named here that decodes on is only due again later: its counts stay lazy.
        counts = self.counts
        if named:
            counts.schedule(named)
        counts.dues.pop(clock, None)  # everyone due now was named: rescheduled or finishing
        # A page is held while a table of the batch holds it: the batch's distinct pages.
        if waiting and len(requests.active) < self.batch_limit:
            meter.count_idle(len(requests.active), waiting, self.pages.held)
        for rid in finishes:
            # Every ledger forgets a finished request: its lazy steps are never counted in.
            counts.forget(rid)
            requests.leave(rid)
            tables.pop(rid, None)
            lowering.batch.pop(rid, None)
            self.pages.give_back(rid, frees.get(rid, ()))
        self.monitor.order.keep(waiting)
        self.last_decode = None if finishes else decoding
        self.left = finishes

    def flush(self) -> None:
        """Bring every count up to date, the page ledger, and the monitor's recent events, for
        the full path."""
        self.counts.bring_in(self.clock)
        self.pages.tell()
        self.last_decode = None
        self.left = None
        self.batch = None
        self.monitor.recent.extend(self.taken.later(self.lowering))

    def observe(self, event: IterationEvent) -> Finding | None:
        """The full path for a line :meth:`take` declined (or was not offered)."""
        declined, self.declined = self.declined, False
        if not declined:  # a line take declined was flushed there, before it was lowered
            self.flush()
        if self.begun == event.iteration:
            found = self.monitor.judge(event)
        else:
            found = self.monitor.observe(event)
        self.meter.observe(event)  # the figures of the counts the monitor has just moved
        self.clock += 1  # the line took a step of each request it decoded
        if found is None and declined:  # the lazy set need not start over after a clean line
            self.counts.carry(event, self.clock)
        else:
            self.counts.clear()
        return found
