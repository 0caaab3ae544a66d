"""The monitor's request ledger: where every request is, and what it has (sections 3.1-3.6).

It follows each request through arrival, the waiting queue, admission, preemption and completion,
checking the request-side invariants as the events report them: REQ-1 and REQ-2 (arrival and
conservation), BATCH-2 (who may be admitted; in which order is :mod:`.order`'s) and the LIVE-1
bound. It also holds each request's output and KV token counts, which :mod:`.tokens` checks.
Every method touches only the requests an event names, so its cost follows the iteration.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Sequence

from kvsched.checks.monitor.excuses import Tally
from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.restarts import EARLY_STOP_HINT, restart_hint
from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import ACTIVE, FINISHED, WAITING, RequestStatus
from kvsched.spec.workload import Request, Workload, arrival_order


class RequestLedger:
    """Per-request state, the waiting queue and the batch, kept in step with the events."""

    def __init__(
        self, workload: Workload, properties: TargetProperties, applicable: set[str]
    ) -> None:
        self.properties, self.applicable = properties, applicable
        self.page_size = workload.limits.page_size
        self.requests = {r.id: r for r in workload.requests}  # in the workload's order
        self.prompts: dict[str, int] = {}
        self.outputs: dict[str, int] = {}
        self.arrivals: list[Request] = []
        self.next_arrival = 0
        self.state: dict[str, RequestStatus] = {}  # absent: not arrived yet
        self.queue: OrderedDict[str, None] = OrderedDict()  # waiting, in queue order
        self.active: dict[str, None] = {}  # the batch, in admission order
        self.generated: Counter[str] = Counter()  # output tokens produced so far
        self.kv: Counter[str] = Counter()  # tokens whose KV the request's pages hold
        # Prompt tokens a fold restart turned into output tokens (spec/eventlog.md 4.3.1): its
        # tokens are its prompt minus these plus its output, which owes these more.
        self.moved: Counter[str] = Counter()
        self.admitted_with: dict[str, int] = {}  # output tokens at the latest admission
        self.cut: dict[str, tuple[int, int, int]] = {}  # cut in its prefill: when, KV, tokens
        self.committed = 0  # reservations of the batch: what peak admission commits (3.2)
        self.bound = self.latest = 0  # LIVE-1 (3.6): the latest arrival, prefills and outputs
        self.forgetters: list[Callable[[str], None]] = []  # told of each finished request
        self.tally = Tally()  # what the declarations excused, counted where each is applied
        for request in arrival_order(workload.requests):
            self.declare(request)

    def declare(self, request: Request) -> None:
        """A request, in arrival order (a log may declare them as they come, eventlog.md 8.7)."""
        rid = request.id
        if self.next_arrival > 4096:  # the arrived leave the list: it holds the coming only
            del self.arrivals[: self.next_arrival]
            self.next_arrival = 0
        self.requests[rid] = request
        self.prompts[rid], self.outputs[rid] = request.prompt_tokens, request.output_tokens
        self.arrivals.append(request)
        chunks = self.properties.prefill_iterations(request.prompt_tokens)
        self.bound += max(0, request.arrival - self.latest) + request.output_tokens + chunks
        self.tally.allowance += chunks
        self.latest = max(self.latest, request.arrival)

    def reservation(self, request_id: str) -> int:
        return self.properties.reservation(self.requests[request_id], self.page_size)

    def known(self, request_id: str) -> int:
        """The request's prompt plus its output so far: the tokens its KV may cover."""
        return self.prompts[request_id] - self.moved.get(request_id, 0) + self.generated[request_id]

    def output_length(self, request_id: str) -> int:
        """The output tokens the request produces in all, fold restarts included."""
        return self.outputs[request_id] + self.moved.get(request_id, 0)

    def head(self) -> str | None:
        return next(iter(self.queue), None)

    def unfinished(self) -> list[str]:
        return list(self.requests)  # a request leaves it when it finishes (leave)

    def drained(self) -> bool:
        return not self.requests

    # 3.1 Arrival ------------------------------------------------------------------------------
    def arrive(self, iteration: int) -> list[str]:
        """Queue every request with ``arrival < iteration`` not yet arrived (3.1); those queued
        now, in queue order."""
        queued: list[str] = []
        arrivals, state = self.arrivals, self.state
        while self.next_arrival < len(arrivals) and arrivals[self.next_arrival].arrival < iteration:
            rid = arrivals[self.next_arrival].id
            self.next_arrival += 1
            if rid not in state:  # not already arrived by an explicit operation
                state[rid] = WAITING
                self.queue[rid] = None
                queued.append(rid)
        return queued

    def arrive_now(self, n: int, request_id: str) -> Finding | None:
        """``request_id`` reaches the scheduler in the middle of iteration ``n`` (a version-2
        log's ``arrive``): it queues now, so what was scheduled before did not see it. It may
        come this early only if it arrives at time ``n`` or before (3.1), and only once."""
        request = self.requests.get(request_id)  # a finished request is forgotten
        if request is None and request_id not in self.state:
            return _found(
                "REQ-1",
                n,
                f"{request_id!r} arrived in iteration {n} but no request of the workload is",
                request_id,
            )
        if request is not None and request.arrival > n:
            return _found(
                "REQ-1",
                n,
                f"request {request_id!r} arrived in iteration {n} but arrives at time "
                f"{request.arrival}, so it may reach the scheduler during iteration "
                f"{request.arrival} at the earliest",
                request_id,
            )
        if request_id in self.state:
            return _found(
                "REQ-1",
                n,
                f"request {request_id!r} arrived again in iteration {n}; it is already "
                f"{self.where(request_id)}",
                request_id,
            )
        self.state[request_id] = WAITING
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
        if self.state.get(request_id) != ACTIVE:
            return _found(
                "REQ-2",
                n,
                f"request {request_id!r} was preempted in iteration {n} but was not in the batch",
                request_id,
            )
        del self.active[request_id]
        self.committed -= self.reservation(request_id)
        self.state[request_id] = WAITING
        self.queue[request_id] = None
        self.queue.move_to_end(request_id, last=False)  # the latest preempted is the new head
        lost = self.kv[request_id]
        decoding = self.generated[request_id] > self.admitted_with.get(request_id, 0)
        if not decoding and lost:
            self.cut[request_id] = (n, lost, self.known(request_id))
        moved = self.properties.moved_on_restart(self.known(request_id), lost, decoding)
        self.moved[request_id] += moved
        # the recompute, and one iteration per token the restart moved to the output (LIVE-1)
        allowed = self.properties.prefill_iterations(lost) + moved
        self.bound += allowed
        self.tally.preempted(allowed, moved)
        self.kv[request_id] = 0
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
            request, state = self.requests.get(rid), self.state.get(rid)  # finished: forgotten
            if request is None and state is None:
                return _found(
                    "REQ-1",
                    n,
                    f"admitted {rid!r}, which no request of the workload is: it never arrived",
                    rid,
                )
            if state is None and request is not None:
                return _found(
                    "REQ-1",
                    n,
                    f"request {rid!r} was admitted in iteration {n} but arrives at "
                    f"time {request.arrival}, so it may join from iteration {request.arrival + 1}",
                    rid,
                )
            if state != WAITING:
                what = "is already in the batch" if state == ACTIVE else "has already finished"
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was admitted again in iteration {n} but {what}",
                    rid,
                )
            if static and batch_before:
                return _found(
                    "BATCH-2",
                    n,
                    f"static batching admitted {rid!r} in iteration {n} while the "
                    f"batch {request_list(batch_before)} had not drained",
                    rid,
                    *batch_before[:3],
                )
            self.join(rid)
        return None

    def join(self, rid: str) -> None:
        """``rid``, waiting, joins the batch: shown to break nothing (:meth:`admit`)."""
        del self.queue[rid]
        self.admitted_with[rid] = self.generated[rid]
        self.tally.unordered += "BATCH-4" not in self.applicable  # the order left unjudged
        self.state[rid] = ACTIVE
        self.active[rid] = None
        self.committed += self.reservation(rid)

    # 3.5 Completion ---------------------------------------------------------------------------
    def finish(self, n: int, decoded: Sequence[str], ids: Sequence[str]) -> Finding | None:
        """REQ-2 for an iteration that decoded ``decoded`` and finished ``ids``: every request
        that produced its last token finishes, once, from the batch (or, declared, earlier: 4.9)."""
        finished = set(ids)
        generated, outputs, moved = self.generated, self.outputs, self.moved
        for rid in decoded:  # output_length inlined; a finished request has none (DEC-2's)
            length = outputs.get(rid, -1) + moved.get(rid, 0) if moved else outputs.get(rid, -1)
            if generated[rid] == length and rid not in finished:
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} produced its last token "
                    f"({length}) in iteration {n} but was not finished{self.fold_hint(rid)}",
                    rid,
                )
        for rid in ids:
            state = self.state.get(rid)  # 4.9: declared, an abort may take it from the queue
            if state != ACTIVE and not (state == WAITING and self.properties.stops_early):
                early = EARLY_STOP_HINT if state == WAITING else ""
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was finished in iteration {n} but is {self.where(rid)}: "
                    f"each request finishes once, from the batch{early}",
                    rid,
                )
            wanted, made = self.output_length(rid), self.generated[rid]  # 4.9: up to the most
            if made > wanted or (made < wanted and not self.properties.stops_early):
                early = "" if made > wanted else EARLY_STOP_HINT
                return _found(
                    "REQ-2",
                    n,
                    f"request {rid!r} was finished in iteration {n} after "
                    f"{made} of its {wanted} output tokens{self.fold_hint(rid) or early}",
                    rid,
                )
            if made < wanted:  # the one place an early stop is excused
                self.tally.stop_early(made, state == WAITING)
            self.leave(rid, state == WAITING)
        return None

    def leave(self, rid: str, waiting: bool = False) -> None:
        """``rid`` finishes, from the batch or (``waiting``) the queue: shown to break nothing
        (:meth:`finish`). Only its state stays, so memory follows the live requests."""
        self.state[rid] = FINISHED
        if waiting:
            del self.queue[rid]
        else:
            del self.active[rid]
            self.committed -= self.reservation(rid)
        for ledger in (self.requests, self.prompts, self.outputs, self.generated, self.kv):
            ledger.pop(rid, None)
        for optional in (self.moved, self.admitted_with, self.cut):
            optional.pop(rid, None)
        for forget in self.forgetters:
            forget(rid)

    def fold_hint(self, request_id: str) -> str:
        cut, restart = self.cut.get(request_id), self.properties.restart
        return "" if cut is None else restart_hint(request_id, restart, cut, self.moved[request_id])

    def where(self, request_id: str) -> str:
        """Where a request is, in words, for a finding's message."""
        state = self.state.get(request_id)  # each state is named as a message says it
        if state is None:
            known = request_id in self.requests
            return "not arrived yet" if known else "not a request of the workload"
        return state


def _found(invariant: str, iteration: int, message: str, *requests: str) -> Finding:
    return Finding(invariant, iteration, message, requests=tuple(requests))
