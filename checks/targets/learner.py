"""The learner adapter: a solution of the lesson's exercise, seen as a protocol scheduler.

A learner writes ``schedule_iteration(state, limits, policy) -> state`` over plain dicts and lists
(spec/learner.md). :class:`LearnerScheduler` keeps the state between iterations, hands the learner
a fresh copy each time, and reads the scheduling decision off the difference between the state it
gave and the state it got back: who left the queue (admitted), whose ``generated`` grew (decoded),
which pages each request lists (page tables), who was appended to ``finished`` and how long the
free list is. Judging that decision is the monitor's job; the adapter only refuses a state it
cannot read, which the engine reports as PROTO-1.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from kvsched.checks.targets.learner_state import LearnerStateError, copy_state, readable_state
from kvsched.reference.engine import Foreseeing
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, SchedulerFactory, StepOutcome
from kvsched.spec.workload import Limits, Request, pages_for

LearnerFunction = Literal["allocate_kv_pages", "schedule_iteration"]
LEARNER_FUNCTIONS: tuple[LearnerFunction, ...] = typing.get_args(LearnerFunction)
"""The exercise's functions (spec/learner.md); a learner's file is judged on both."""

ScheduleIteration = Callable[[dict[str, Any], dict[str, int], str], Any]
AllocateKvPages = Callable[..., Any]


@dataclass(frozen=True)
class LearnerSolution:
    """The exercise's functions found in a learner's file; either may be missing."""

    source: str
    allocate_kv_pages: AllocateKvPages | None
    schedule_iteration: ScheduleIteration | None
    isolated: bool = False
    """The functions run in another process (a host): every call sends copies of its
    arguments and answers with new objects, which no code of the learner's holds."""


def solution_from_namespace(source: str, namespace: Any) -> LearnerSolution | None:
    """The exercise's functions defined by a module, or None if it defines neither."""
    found = {name: getattr(namespace, name, None) for name in LEARNER_FUNCTIONS}
    defined = {name: function for name, function in found.items() if callable(function)}
    if not defined:
        return None
    return LearnerSolution(
        source, defined.get("allocate_kv_pages"), defined.get("schedule_iteration")
    )


def learner_factory(
    schedule_iteration: ScheduleIteration, policy: str, isolated: bool = False
) -> SchedulerFactory:
    """A scheduler factory that runs ``schedule_iteration`` under ``policy``; ``isolated`` as
    :attr:`LearnerSolution.isolated` says."""

    def build(limits: Limits) -> LearnerScheduler:
        return LearnerScheduler(limits, schedule_iteration, policy, isolated)

    return build


def initial_state(limits: Limits) -> dict[str, Any]:
    """The state before iteration 1: nobody has arrived and every page is free (spec/learner.md)."""
    return {
        "iteration": 0,
        "waiting": [],
        "running": [],
        "finished": [],
        "free_pages": list(range(limits.pool_pages)),
    }


@runtime_checkable
class Stepping(Protocol):
    """A ``schedule_iteration`` in another process that takes a run's state as a delta
    (remote.py, ``RemoteTarget.step``): kvsched's state lists every request that ever
    finished, and sending it whole each iteration made a run cost the square of its length."""

    def step(
        self,
        key: int,
        given: dict[str, Any],
        limits: dict[str, int],
        policy: str,
        ahead: Ahead | None = None,
    ) -> Any:
        """``(kept, state)``: the returned state, less the first ``kept`` finished requests of
        ``given``, which it returned unchanged. ``ahead``: what lets the host run the next
        iterations of the run by itself (:class:`Ahead`); without it, this iteration alone."""

    def holds(self, key: int, finished: list[Any]) -> None:
        """The last step's answer was taken: its finished requests are ``finished``."""


@dataclass(frozen=True)
class Ahead:
    """The run's next iterations as kvsched will drive them, for a host that runs them ahead:
    the state of iteration i + 1 is the state the learner returned in iteration i, as read off
    the wire, with ``iteration`` set to i + 1 and ``arrivals(count)[0]``'s records appended to
    ``waiting``, which is what :class:`LearnerScheduler` builds (``add_request``)."""

    arrivals: Callable[[int], list[list[dict[str, Any]]]]
    """The records of the requests arriving before each of the next ``count`` iterations, as
    far as the run's bound."""
    total: int
    """The run's requests: once the state lists as many finished, the run has drained."""


_RUNS = itertools.count(1)


class LearnerRaised(Exception):
    """The learner's ``schedule_iteration`` raised; the verdict names it, not ``schedule()``."""

    call = "schedule_iteration"


class LearnerScheduler(Foreseeing):
    """Drives a learner's ``schedule_iteration`` through the scheduler protocol."""

    def __init__(
        self,
        limits: Limits,
        schedule_iteration: ScheduleIteration,
        policy: str,
        isolated: bool = False,
    ) -> None:
        self.policy = policy
        # The copies keep the learner from changing the state kvsched compares against; a call
        # into another process copies both ways already.
        self._copy = _as_is if isolated else copy_state
        self._plain = isolated  # the wire's decoder makes only dicts, lists, ints and strings
        self._limits = limits
        self._schedule_iteration = schedule_iteration
        self._state = initial_state(limits)
        self._pending: tuple[dict[str, Any], StepOutcome] | None = None
        self._outputs: dict[str, int] = {}  # kvsched's own: the learner may change its copy's
        # Only kvsched's own proxy of a hosted function steps: never a learner's object here.
        self._stepping: Stepping | None = None
        if isolated and isinstance(schedule_iteration, Stepping):
            self._stepping = schedule_iteration
        self._run = next(_RUNS)
        # Each finished request's ``generated`` by id, for the finished list it was read from:
        # kept from iteration to iteration, as reading every finished request each iteration
        # made a run cost the square of its length.
        self._index: tuple[list[Any] | None, dict[str, Any]] = (None, {})
        self._next_index = self._index
        # The run's arrivals by iteration and its bound (:meth:`foresee`), for a hosted learner
        # to run ahead; the requests handed over since the last iteration, to hold them to it.
        self._joining: Mapping[int, Sequence[Request]] | None = None
        self._last = self._total = 0
        self._arrived: list[Request] = []

    def foresee(self, joining: Mapping[int, Sequence[Request]], last: int) -> None:
        if self._stepping is not None:
            self._joining, self._last = joining, last
            self._total = sum(map(len, joining.values()))

    def add_request(self, request: Request) -> None:
        self._outputs[request.id] = request.output_tokens
        self._state["waiting"].append(waiting_record(request))
        if self._joining is not None:
            self._arrived.append(request)

    def schedule(self) -> ScheduledBatch:
        before = self._state
        given = self._copy(before)
        given["iteration"] = before["iteration"] + 1
        limits = {
            "batch_limit": self._limits.batch_limit,
            "page_size": self._limits.page_size,
            "pool_pages": self._limits.pool_pages,
        }
        kept = 0
        try:
            if self._stepping is not None:
                ahead = self._ahead(given["iteration"])
                kept, returned = self._stepping.step(self._run, given, limits, self.policy, ahead)
            else:
                returned = self._schedule_iteration(given, limits, self.policy)
        except Exception as error:
            cause = likely_cause(given, self._limits.page_size, self._limits.pool_pages)
            raise LearnerRaised(cause) from error
        after = self._copy(readable_state(returned, self._plain))  # the learner may keep it
        finished = before["finished"]
        if self._stepping is not None:
            # The first ``kept`` finished requests came back unchanged, as the host found them:
            # they are the ones kvsched holds, already read.
            after["finished"] = finished[:kept] + after["finished"]
            self._stepping.holds(self._run, after["finished"])
        after["iteration"] = given["iteration"]
        index = self._index[1] if self._index[0] is finished else _generated(finished)
        batch, outcome = _decision(before, after, self._outputs, kept, index)
        self._pending = (after, outcome)
        if kept == len(finished):  # after's index is before's and the newly finished requests
            if len(after["finished"]) > kept:  # else before's, unchanged (never written to)
                index = {**index, **_generated(after["finished"][kept:])}
            self._next_index = (after["finished"], index)
        else:
            self._next_index = (None, {})
        return batch

    def _ahead(self, iteration: int) -> Ahead | None:
        """What lets the host run past ``iteration``, if the requests handed over before it
        are those foreseen; else nothing from now on (this run goes one iteration per call)."""
        joining, arrived = self._joining, self._arrived
        if joining is None:
            return None
        self._arrived = []
        if tuple(arrived) != tuple(joining.get(iteration, ())):
            self._joining = None
            return None
        last = self._last

        def arrivals(count: int) -> list[list[dict[str, Any]]]:
            until = min(iteration + count, last)
            return [
                [waiting_record(r) for r in joining.get(i, ())]
                for i in range(iteration + 1, until + 1)
            ]

        return Ahead(arrivals, self._total)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        # The learner already decoded inside schedule_iteration; the engine's tokens are the
        # decode entries read off its state, so there is nothing left to apply.
        if self._pending is None:
            raise LearnerStateError("update_from_output() called before schedule()")
        self._state, outcome = self._pending
        self._pending = None
        self._index = self._next_index
        return outcome


def waiting_record(request: Request) -> dict[str, Any]:
    """``request`` as the learner's state lists it on arrival (spec/learner.md, 2.1)."""
    return {
        "id": request.id,
        "arrival": request.arrival,
        "prompt_tokens": request.prompt_tokens,
        "output_tokens": request.output_tokens,
        "generated": 0,
        "pages": [],
    }


def _generated(records: list[Any]) -> dict[str, Any]:
    return {r["id"]: r["generated"] for r in records}


def _decision(
    before: dict[str, Any],
    after: dict[str, Any],
    outputs: dict[str, int],
    kept: int = 0,
    finished_generated: dict[str, Any] | None = None,
) -> tuple[ScheduledBatch, StepOutcome]:
    """What the learner decided in one iteration, read off the two states. The first ``kept``
    finished requests of ``after`` are the very records of ``before``'s; ``finished_generated``
    is :func:`_generated` of ``before``'s finished requests."""
    old_finished = after["finished"][kept : len(before["finished"])]
    if [r["id"] for r in old_finished] != [r["id"] for r in before["finished"][kept:]]:
        raise LearnerStateError(
            "state['finished'] lost or reordered requests that had finished earlier; append "
            "newly finished requests at its end and leave the rest as they were"
        )
    changed = _changed_since_finishing(before["finished"][kept:], old_finished)
    newly_finished = after["finished"][len(before["finished"]) :]
    for record in newly_finished:
        if not record["pages"] and record.get("prompt_tokens", 0) + record["generated"] > 0:
            raise LearnerStateError(
                f"request '{record['id']}' finished with an empty 'pages' list; leave a finished "
                "request's pages as they were, since they tell which pages it gave back "
                "(spec/learner.md, 2.2)"
            )
    if finished_generated is None:
        finished_generated = _generated(before["finished"])
    # Read as one dict over waiting, running and finished, a finished request's entry winning;
    # looked up in two, so that no iteration copies the index of every request that finished.
    active_generated = {
        r["id"]: r["generated"] for key in ("waiting", "running") for r in before[key]
    }

    # The batch in admission order: earlier members first, as they stood before, then newcomers.
    now = {r["id"]: r for r in after["running"] + newly_finished}
    was_running = [r["id"] for r in before["running"]]
    ran = set(was_running)
    newcomers = {rid: None for rid in now if rid not in ran}  # a set in the order of ``now``
    admitted: list[str] = []
    if newcomers:  # most iterations admit nobody: the queue is read only when someone joined
        # Admission takes from the front of the queue, so the queue's order is the admission
        # order, whether a newcomer is still running or already finished (a one-token request).
        admitted = [rid for r in before["waiting"] if (rid := r["id"]) in newcomers]
        queued = set(admitted)
        admitted += [rid for rid in newcomers if rid not in queued]
    batch = [now[rid] for rid in was_running if rid in now] + [now[rid] for rid in admitted]

    decode: list[str] = []
    for record in itertools.chain(batch, after["waiting"], changed):
        rid = record["id"]
        prior = finished_generated.get(rid)
        grown = record["generated"] - (active_generated.get(rid, 0) if prior is None else prior)
        if grown:
            if grown < 0:
                earlier = active_generated[rid] if prior is None else prior
                raise LearnerStateError(
                    f"request '{rid}': 'generated' went down from {earlier} to "
                    f"{record['generated']}; it only counts up"
                )
            if grown > (output := outputs.get(rid, 0)) + 1:  # a cheap int, costly entries
                raise LearnerStateError(
                    f"request '{rid}': 'generated' grew by {grown} in one iteration, past "
                    f"its whole output ({output} tokens) and one more; each iteration makes one "
                    "token"
                )
            decode.extend([rid] * grown)  # two tokens in one iteration show as two entries
    # Requests listing pages while waiting are reported too, so the monitor can see them (PAGE-4).
    holders = batch + [r for r in after["waiting"] if r["pages"]]
    page_tables = {r["id"]: tuple(r["pages"]) for r in holders}
    outcome = StepOutcome(
        finished=tuple(r["id"] for r in newly_finished),
        freed={r["id"]: tuple(r["pages"]) for r in newly_finished},
        free_pages=len(after["free_pages"]),
    )
    return ScheduledBatch(tuple(admitted), tuple(decode), page_tables), outcome


def _changed_since_finishing(was: list[Any], now: list[Any]) -> list[Any]:
    """The requests of ``now`` (the same ids as ``was``: requests that had finished before this
    iteration) whose ``generated`` changed, to be read as tokens produced (DEC-2 judges a token
    for a finished request, PROTO-1 a count that went down); any other field of the contract
    changed is a state kvsched cannot read (spec/learner.md, 2.2: leave a finished request as it
    was). Fields a learner added of its own are not read."""
    if now == was:  # compared in C: a learner's check reads every finished request each step
        return []
    changed = []
    for before, after in zip(was, now, strict=True):
        if after == before:
            continue
        for field in _CONTRACT:
            if field != "generated" and after.get(field) != before.get(field):
                raise LearnerStateError(
                    f"request '{before['id']}' had finished, yet its {field!r} changed from "
                    f"{before.get(field)!r} to {after.get(field)!r}; leave a finished request "
                    "as it was (spec/learner.md, 2.2)"
                )
        if after["generated"] != before["generated"]:
            changed.append(after)
    return changed


_CONTRACT = tuple(waiting_record(Request("", 0, 0, 0)))
"""The fields of a request's record the contract defines (spec/learner.md, 2.1)."""


def likely_cause(state: Any, page_size: int, pool_pages: int) -> str:
    """A cause the crash followed from, read off the state the learner changed before raising.

    Admitting requests whose peak pages together exceed the pool (section 3.2) empties the free
    list later, where the crash shows; naming the admission points at the line to fix.
    """
    try:
        running = [r for r in state["running"] if isinstance(r, dict)]
        peaks = sum(pages_for(r["prompt_tokens"] + r["output_tokens"], page_size) for r in running)
    except (KeyError, TypeError):
        return ""
    if peaks <= pool_pages:
        return ""
    ids = ", ".join(str(r.get("id")) for r in running)
    return (
        f"likely cause: the running requests ({ids}) need {peaks} pages at their peaks, more "
        f"than the pool's {pool_pages}; admission must count each request's peak pages "
        "(spec/learner.md, PAGE-5)"
    )


def _as_is(state: dict[str, Any]) -> dict[str, Any]:
    """The state's top level only: the copy an isolated call makes itself is the deep one."""
    return dict(state)
