"""The monitor's admission-order and chunking rules, as the target declares them (BATCH-4,
BATCH-5; spec/eventlog.md 4.6).

Under ``fcfs`` the requests admitted in an iteration must be the head of the queue the target
reported after the previous iteration, with that iteration's arrivals behind it, and that queue
must itself be in order: by when each request joined it, preempted requests at the head, the
latest first (or, declared ``requeue="tail"``, at the tail as they came), then arrivals in order.
Requests that joined in the same iteration may stand in any order among themselves (nano-vllm
puts the last preempted first, a heap-based engine by its key). Under ``priority`` and
``shortest-first`` each admitted request must have the least key, (priority, arrival position)
or (prompt tokens, arrival position), of the requests waiting then (the prompt as a declared
fold restart leaves it); a heap with lazy deletion keeps that at ``log`` cost per request named.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.spec.events import IterationEvent
from kvsched.spec.text import plural
from kvsched.spec.vocabulary import WAITING

_WORDS = {
    "fcfs": "first come, first served, preempted requests at the head",
    "priority": "by priority, then arrival",
    "shortest-first": "shortest prompt first, then arrival",
}
_TAIL = "first come, first served, preempted requests at the tail"


class OrderRules:
    """BATCH-4 against the declared order; BATCH-5 against the declared chunking."""

    def __init__(self, ledger: RequestLedger, checks: set[str]) -> None:
        self.ledger = ledger
        properties = ledger.properties
        self.order = properties.declared_order if "BATCH-4" in checks else "none"
        self.chunking = properties.chunking if "BATCH-5" in checks else None
        self.position = {r.id: i for i, r in enumerate(ledger.arrivals)}
        """Each unfinished request's place in arrival order."""
        self.places = len(self.position)
        self.reported: Sequence[str] = ()  # the queue the target reported last, head first
        self.heap: list[tuple[int, int, str]] = []
        self.words = _TAIL if properties.requeue == "tail" else _WORDS.get(self.order, "")
        self.head_requeue = properties.requeue == "head"
        self.joined: dict[str, tuple[int, int, bool]] = {}
        """Under fcfs, each request's place by when it last joined the queue: its sort key, the
        iteration, and whether a preemption sent it there."""

    def declare(self, rid: str) -> None:
        """``rid`` was declared after every request already known (8.7)."""
        self.position[rid] = self.places
        self.places += 1

    def forget(self, rid: str) -> None:
        self.position.pop(rid, None)
        self.joined.pop(rid, None)

    def key(self, rid: str) -> tuple[int, int]:
        ledger = self.ledger
        request = ledger.live[rid].request
        if self.order == "priority":
            return request.priority, self.position[rid]
        # A fold restart makes a waiting request's output so far part of its prompt (4.3).
        folds = ledger.properties.restart == "fold"
        return ledger.live[rid].known() if folds else request.prompt_tokens, self.position[rid]

    def waiting(self, rid: str, n: int, preempted: bool = False) -> None:
        """``rid`` joined the queue in iteration ``n`` (arrived, or ``preempted``)."""
        if self.order in ("priority", "shortest-first"):
            heapq.heappush(self.heap, (*self.key(rid), rid))
        elif self.order == "fcfs":
            # At the head, a later preemption stands before an earlier one, and every one
            # before every arrival (iterations count from 1); at the tail, all by iteration.
            key = -n if preempted and self.head_requeue else n
            self.joined[rid] = (key, n, preempted)

    def head(self, event: IterationEvent) -> str | None:
        """The request the declared order serves next, after this iteration's admissions;
        ``None`` if the log cannot say which (an abort from the queue, below)."""
        if self.order in ("priority", "shortest-first"):
            return self._least(frozenset())  # an aborted request still waits: it is a candidate
        # The schedule may have had a request aborted from the queue at its head (4.9).
        if self.ledger.properties.stops_early and event.finished_outside_the_batch:
            self.ledger.tally.unjudged_head(event.iteration)
            return None
        # next(iter(...)): the head without materialising a long queue
        head = next(iter(event.waiting), None) if event.waiting else self.ledger.head()
        # A reported head that finished (and was forgotten) is not served next.
        return head if head in self.ledger.live else None

    def _least(self, admitted: frozenset[str]) -> str | None:
        """The least key among the waiting and the ``admitted`` not yet accounted for."""
        status, infeasible = self.ledger.status, self.ledger.infeasible
        while self.heap and (
            not (status(self.heap[0][2]) is WAITING or self.heap[0][2] in admitted)
            or self.heap[0][2] in infeasible  # LIVE-5's: rejected, never served (1.2)
        ):
            heapq.heappop(self.heap)
        return self.heap[0][2] if self.heap else None

    def check_admissions(
        self, n: int, event: IterationEvent, arrivals: Sequence[str]
    ) -> Finding | None:
        """BATCH-4, once the ledger admitted: each admission was the declared order's next."""
        if self.order == "none" or not event.admitted:
            return None
        if self.order == "fcfs":
            return self._fcfs(n, event.admitted, event.preempted, arrivals)
        left = frozenset(event.admitted)
        for rid in event.admitted:
            least = self._least(left)
            if least is None:  # not waiting in the order's view: REQ-1 or REQ-2 said so
                break
            if least != rid:
                return self._skipped(n, rid, least)
            heapq.heappop(self.heap)
            left -= {rid}
        return None

    def check_admitted(
        self, n: int, admitted: tuple[str, ...], arrivals: Sequence[str]
    ) -> Finding | None:
        """:meth:`check_admissions` for an iteration that preempted no one, under fcfs or none
        (the orders that keep no heap, so that checking changes nothing)."""
        if self.order not in ("fcfs", "none"):
            raise ValueError(f"check_admitted is for fcfs and none, not {self.order}")
        if self.order == "none" or not admitted:
            return None
        return self._fcfs(n, admitted, (), arrivals)

    def _fcfs(
        self, n: int, order: tuple[str, ...], out: tuple[str, ...], arrivals: Sequence[str]
    ) -> Finding | None:
        if len(order) == 1 and not out:  # the usual admission: is it the queue's head?
            reported = self.reported
            if (reported[0] if reported else next(iter(arrivals), None)) == order[0]:
                return None
        preempted, admitted, status = set(out), set(order), self.ledger.status
        # A request no scheduler can hold is to be rejected, not served: whoever is admitted
        # overtakes it rightly, and LIVE-5 judges how long it stays (semantics.md 1.2).
        infeasible = self.ledger.infeasible
        queue: Iterator[str] = (
            rid
            for rid in chain(self.reported, arrivals)
            if rid not in preempted
            and (status(rid) is WAITING or rid in admitted)
            and rid not in infeasible
        )
        for rid in order:
            if rid in preempted:
                continue
            head = next(queue, None)
            if head is not None and head != rid:
                return self._skipped(n, rid, head)
        return None

    def _skipped(self, n: int, rid: str, head: str) -> Finding:
        message = (
            f"request {rid!r} was admitted in iteration {n} ahead of {head!r}, which came first "
            f"in the waiting queue under the declared order ({self.words})"
        )
        return Finding("BATCH-4", n, message, requests=(rid, head))

    def after(self, event: IterationEvent) -> Finding | None:
        """BATCH-4 on the queue the target reported (:meth:`check_queue`), then keep it for
        the next iteration's admissions."""
        finding = self.check_queue(event.iteration, event.waiting)
        self.keep(event.waiting)
        return finding

    def check_queue(self, n: int, waiting: Sequence[str]) -> Finding | None:
        """Under fcfs, whether the queue reported after iteration ``n`` lists its requests by
        when they joined it. One not waiting is REQ-2's to name, and is passed over here."""
        if self.order != "fcfs" or len(waiting) < 2:
            return None
        joined = self.joined
        last: tuple[int, int, bool] | None = None
        ahead = ""
        for rid in waiting:
            place = joined.get(rid)
            if place is None:
                continue
            if last is not None and place[0] < last[0]:
                message = (
                    f"the queue the target reported after iteration {n} lists {ahead!r} "
                    f"({_joined(last)}) ahead of {rid!r} ({_joined(place)}), which comes first "
                    f"under the declared order ({self.words})"
                )
                return Finding("BATCH-4", n, message, requests=(rid, ahead))
            last, ahead = place, rid
        return None

    def follows(
        self,
        waiting: tuple[str, ...],
        admitted: tuple[str, ...],
        arrivals: Sequence[str],
        preempted: tuple[str, ...] = (),
    ) -> bool:
        """Whether ``waiting`` is the queue reported last with ``arrivals`` behind it, less
        the ``admitted`` at its head, and with the ``preempted`` (none admitted then) in any
        order at its head: then it is in order if that queue was, and :meth:`check_queue` has
        no work (a queue judged, or the one the ledger keeps in order). Requests preempted in
        one iteration join it together, ahead of every one waiting then."""
        if self.order != "fcfs" or not waiting:
            return True
        before = tuple(self.reported)
        if arrivals:
            before += tuple(arrivals)
        if not preempted:
            return before[len(admitted) :] == waiting
        if admitted or not self.head_requeue:
            return False  # a tail's order among the iteration's arrivals is the full path's
        ahead = len(preempted)
        return set(waiting[:ahead]) == set(preempted) and waiting[ahead:] == before

    def keep(self, waiting: Sequence[str]) -> None:
        # A log may leave its queue out (the field is optional, and an empty one is not
        # written): then the queue is the one the spec predicts (arrival order, preempted
        # requests at the head), not an empty one that every waiting request seems to overtake.
        self.reported = waiting if waiting else tuple(self.ledger.queue)

    def chunks_allowed(self, partial: int) -> bool:
        """BATCH-5: whether an iteration may compute ``partial`` chunks short of their end."""
        if self.chunking is None or self.chunking == "all":
            return True
        return partial <= (0 if self.chunking == "none" else 1)

    def check_chunking(
        self, n: int, event: IterationEvent, computed: Mapping[str, int]
    ) -> Finding | None:
        """BATCH-5: a chunk short of its end (computed, no token) only as declared."""
        if event.computed is None or self.chunks_allowed(len(computed)):
            return None  # as many chunks as requests computed are allowed: no need to count them
        decoded = set(event.decoded)
        partial = [rid for rid, amount in computed.items() if amount and rid not in decoded]
        if self.chunks_allowed(len(partial)):
            return None
        what = (
            "the target declares no chunked prefill"
            if self.chunking == "none"
            else "the target declares that only the first request of a batch is chunked"
        )
        message = (
            f"in iteration {n} {plural(len(partial), 'request')} computed part of a prompt without "
            f"reaching its end ({', '.join(map(repr, partial[:5]))}), but {what}"
        )
        return Finding("BATCH-5", n, message, requests=tuple(partial))


def _joined(place: tuple[int, int, bool]) -> str:
    return f"{'preempted' if place[2] else 'arrived'} in iteration {place[1]}"
