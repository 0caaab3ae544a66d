"""The monitor's request ledger: where every request is, and what it has (sections 3.1-3.6).

It follows each request through arrival, the waiting queue, admission, preemption and completion,
checking the request-side invariants as the events report them: REQ-1 and REQ-2 (arrival and
conservation), BATCH-2 (who may be admitted; in which order is :mod:`.order`'s) and the LIVE-1
bound. Each request's state is its record (:mod:`kvsched.reference.record`), which every check,
the meter and the fast path read. Each method touches only the requests an event names.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence

from kvsched.checks.monitor.excuses import Tally
from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.restarts import EARLY_STOP_HINT, restart_hint
from kvsched.reference.record import Records
from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import FINISHED, NOT_ARRIVED, RUNNING, WAITING, RequestStatus
from kvsched.spec.workload import Request, Workload, arrival_order, infeasible


class RequestLedger:
    """Per-request state, the waiting queue and the batch, kept in step with the events."""

    def __init__(
        self, workload: Workload, properties: TargetProperties, applicable: set[str]
    ) -> None:
        self.properties, self.applicable = properties, applicable
        self.page_size = workload.limits.page_size
        self.usable = properties.usable_pages(workload.limits)
        self.limits = workload.limits
        self.records = Records(properties, self.page_size)
        self.live = self.records.live  # declared and not finished, in the workload's order
        self.finished: set[str] = set()
        self.arrivals: list[Request] = []
        self.next_arrival = 0
        self.queue: OrderedDict[str, None] = OrderedDict()  # waiting, in queue order
        self.active: dict[str, None] = {}  # the batch, in admission order
        self.cut: dict[str, tuple[int, int, int]] = {}  # cut in its prefill: when, KV, tokens
        self.committed = 0  # reservations of the batch: what peak admission commits (3.2)
        self.bound = self.latest = 0  # LIVE-1 (3.6): the latest arrival, prefills and outputs
        self.forgetters: list[Callable[[str], None]] = []  # told of each finished request
        self.tally = Tally()  # what the declarations excused, counted where each is applied
        # Requests no scheduler can hold (semantics.md 1.2), unfinished, each with the iteration
        # that left it at the head of the queue (0: not yet): LIVE-5's, and REQ-2 lets them
        # finish without their output, from the queue too.
        self.infeasible: dict[str, int] = {}
        for request in workload.requests:  # the records in the workload's order
            self.records.declare(request)
        for request in arrival_order(workload.requests):
            self._coming(request)

    def declare(self, request: Request) -> None:
        """A request, in arrival order (a log may declare them as they come, eventlog.md 8.7)."""
        self.records.declare(request)
        self._coming(request)

    def _coming(self, request: Request) -> None:
        """``request``, declared, will arrive: what its arrival adds to the LIVE-1 bound."""
        if self.next_arrival > 4096:  # the arrived leave the list: it holds the coming only
            del self.arrivals[: self.next_arrival]
            self.next_arrival = 0
        self.arrivals.append(request)
        if infeasible(request, self.limits):
            self.infeasible[request.id] = 0
        chunks = self.properties.prefill_iterations(request.prompt_tokens)
        self.bound += max(0, request.arrival - self.latest) + request.output_tokens + chunks
        self.tally.allowance += chunks
        self.latest = max(self.latest, request.arrival)

    def reservation(self, request_id: str) -> int:
        return self.live[request_id].reservation

    def status(self, request_id: str) -> RequestStatus | None:
        """Where the request is; ``None`` if it is no request of the workload."""
        record = self.live.get(request_id)
        if record is not None:
            return record.status
        return FINISHED if request_id in self.finished else None

    def head(self) -> str | None:
        return next(iter(self.queue), None)

    def unfinished(self) -> list[str]:
        return list(self.live)  # a request leaves it when it finishes (leave)

    def drained(self) -> bool:
        return not self.live

    # 3.1 Arrival ------------------------------------------------------------------------------
    def arrive(self, iteration: int) -> list[str]:
        """Queue every request with ``arrival < iteration`` not yet arrived (3.1); those queued
        now, in queue order."""
        queued: list[str] = []
        arrivals = self.arrivals
        while self.next_arrival < len(arrivals) and arrivals[self.next_arrival].arrival < iteration:
            rid = arrivals[self.next_arrival].id
            self.next_arrival += 1
            if self.records.arrive(rid):  # else it arrived earlier, by an operation
                self.queue[rid] = None
                queued.append(rid)
        return queued

    def arrive_now(self, n: int, request_id: str) -> Finding | None:
        """``request_id`` reaches the scheduler in the middle of iteration ``n`` (a version-2
        log's ``arrive``): it queues now, so what was scheduled before did not see it. It may
        come this early only if it arrives at time ``n`` or before (3.1), and only once."""
        record = self.live.get(request_id)  # a finished request is forgotten
        if record is None and request_id not in self.finished:
            return _found(
                "REQ-1",
                n,
                f"{request_id!r} arrived in iteration {n} but no request of the workload is",
                request_id,
            )
        if record is not None and (arrival := record.request.arrival) > n:
            return _found(
                "REQ-1",
                n,
                f"request {request_id!r} arrived in iteration {n} but arrives at time "
                f"{arrival}, so it may reach the scheduler during iteration {arrival} at the "
                "earliest",
                request_id,
            )
        if not self.records.arrive(request_id):
            return _found(
                "REQ-1",
                n,
                f"request {request_id!r} arrived again in iteration {n}; it is already "
                f"{self.where(request_id)}",
                request_id,
            )
        self.queue[request_id] = None
        return None

    # Preemption (spec/eventlog.md 4.3) ----------------------------------------------------------
    def preempt(self, n: int, request_id: str) -> Finding | None:
        """``request_id`` leaves the batch for the head of the queue, its KV lost."""
        if not self.properties.preemption:
            return _found(
                "REQ-2",
                n,
                f"request {request_id!r} was preempted, but the target does not "
                "declare preemption: a request leaves the batch only by finishing",
                request_id,
            )
        record = self.live.get(request_id)
        if record is None or record.status is not RUNNING:
            return _found(
                "REQ-2",
                n,
                f"request {request_id!r} was preempted in iteration {n} but was not in the batch",
                request_id,
            )
        del self.active[request_id]
        self.committed -= record.reservation
        self.queue[request_id] = None  # at the tail, where a declared "tail" requeue leaves it
        if self.properties.requeue == "head":
            self.queue.move_to_end(request_id, last=False)  # the latest preempted is the head
        else:
            self.tally.requeued_at_tail += 1
        if record.kv and record.generated == record.admitted_with:  # cut within its prefill
            self.cut[request_id] = (n, record.kv, record.known())
        lost, moved = self.records.preempt(request_id)
        # the recompute, and one iteration per token the restart moved to the output (LIVE-1)
        allowed = self.properties.prefill_iterations(lost) + moved
        self.bound += allowed
        self.tally.preempted(allowed, moved)
        return None

    # 3.2 Admission ----------------------------------------------------------------------------
    def admit(
        self, n: int, admitted: Sequence[str], joined: Collection[str] = ()
    ) -> Finding | None:
        """REQ-1, REQ-2 (admitted once) and BATCH-2 (static); the order is :mod:`.order`'s.

        ``joined``: requests admitted earlier in the same iteration, one at a time (a version-2
        schedule), which join the same static batch rather than a batch that had not drained."""
        static = "BATCH-2" in self.applicable
        batch_before = [r for r in self.active if r not in joined] if static else []
        for rid in admitted:
            record = self.live.get(rid)  # finished: forgotten
            state = self.status(rid)
            if record is None and state is None:
                return _found(
                    "REQ-1",
                    n,
                    f"admitted {rid!r}, which no request of the workload is: it never arrived",
                    rid,
                )
            if state is NOT_ARRIVED and record is not None:
                time = record.request.arrival
                message = f"arrives at time {time}, so it may join from iteration {time + 1}"
                return _found(
                    "REQ-1", n, f"request {rid!r} was admitted in iteration {n} but {message}", rid
                )
            if state is not WAITING:
                what = "is already in the batch" if state is RUNNING else "has already finished"
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was admitted again in iteration {n} but {what}",
                    rid,
                )
            # Joined either way: the target's batch is what the checks after this one judge,
            # and a safety rule broken there is named before this conformance rule.
            self.join(rid, n)
            if static and batch_before:
                return _found(
                    "BATCH-2",
                    n,
                    f"static batching admitted {rid!r} in iteration {n} while the "
                    f"batch {request_list(batch_before)} had not drained",
                    rid,
                    *batch_before[:3],
                )
        return None

    def join(self, rid: str, n: int) -> None:
        """``rid``, waiting, joins the batch in iteration ``n``: shown to break nothing."""
        del self.queue[rid]
        self.records.admit(rid)
        self.tally.unordered += "BATCH-4" not in self.applicable  # the order left unjudged
        self.active[rid] = None
        self.committed += self.live[rid].reservation
        if self.committed > self.usable and self.properties.admission != "peak":
            self.tally.overcommit(n)  # peak admission's PAGE-5 is BatchRules.check_commitment's

    # 3.5 Completion ---------------------------------------------------------------------------
    def finish(self, n: int, decoded: Sequence[str], ids: Sequence[str]) -> Finding | None:
        """REQ-2 for an iteration that decoded ``decoded`` and finished ``ids``: every request
        that produced its last token finishes, once, from the batch (or, declared, earlier: 4.9)."""
        finished = set(ids)
        live = self.live
        for rid in decoded:  # a finished request has no record (DEC-2's)
            record = live.get(rid)
            if record is None:
                continue
            length = record.output_tokens + record.moved  # output_length, inlined
            if record.generated == length and rid not in finished:
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} produced its last token "
                    f"({length}) in iteration {n} but was not finished{self.fold_hint(rid)}",
                    rid,
                )
        for rid in ids:
            state = self.status(rid)  # 4.9: declared, an abort may take it from the queue
            # A request no scheduler can hold is rejected or aborted, from the queue too (1.2).
            rejected = rid in self.infeasible
            stops = self.properties.stops_early or rejected
            if state is not RUNNING and not (state is WAITING and stops):
                early = EARLY_STOP_HINT if state is WAITING else ""
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was finished in iteration {n} but is {self.where(rid)}: "
                    f"each request finishes once, from the batch{early}",
                    rid,
                )
            record = live[rid]
            wanted, made = record.output_length(), record.generated  # 4.9: up to the most
            if made > wanted or (made < wanted and not stops):
                early = "" if made > wanted else EARLY_STOP_HINT
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was finished in iteration {n} after "
                    f"{made} of its {wanted} output tokens{self.fold_hint(rid) or early}",
                    rid,
                )
            if made < wanted and not rejected:  # the one place an early stop is excused
                self.tally.stop_early(made, state is WAITING)
            self.leave(rid, state is WAITING)
        return None

    def leave(self, rid: str, waiting: bool = False) -> None:
        """``rid`` finishes, from the batch or (``waiting``) the queue: shown to break nothing
        (:meth:`finish`). Only its id stays, so memory follows the live requests."""
        if waiting:
            del self.queue[rid]
        else:
            del self.active[rid]
            self.committed -= self.live[rid].reservation
        self.records.finish(rid)
        self.finished.add(rid)
        self.cut.pop(rid, None)
        if self.infeasible:
            self.infeasible.pop(rid, None)
        for forget in self.forgetters:
            forget(rid)

    def fold_hint(self, request_id: str) -> str:
        cut, record = self.cut.get(request_id), self.records.get(request_id)
        if cut is None or record is None:
            return ""
        return restart_hint(request_id, self.properties.restart, cut, record.moved)

    def where(self, request_id: str) -> str:
        """Where a request is, in words, for a finding's message."""
        state = self.status(request_id)  # each state is named as a message says it
        if state is None:
            return "not a request of the workload"
        return "not arrived yet" if state is NOT_ARRIVED else str(state)


def _found(invariant: str, iteration: int, message: str, *requests: str) -> Finding:
    return Finding(invariant, iteration, message, requests=tuple(requests))
