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

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvsched.spec.protocol import ModelOutput, ScheduledBatch, SchedulerFactory, StepOutcome
from kvsched.spec.workload import Limits, Request, pages_for

STATE_KEYS = ("waiting", "running", "finished", "free_pages")

ScheduleIteration = Callable[[dict[str, Any], dict[str, int], str], Any]
AllocateKvPages = Callable[..., Any]


class LearnerStateError(Exception):
    """The state a learner's ``schedule_iteration`` returned cannot be read (PROTO-1)."""

    call = "schedule_iteration"


@dataclass(frozen=True)
class LearnerSolution:
    """The exercise's functions found in a learner's file; either may be missing."""

    source: str
    allocate_kv_pages: AllocateKvPages | None
    schedule_iteration: ScheduleIteration | None


def solution_from_namespace(source: str, namespace: Any) -> LearnerSolution | None:
    """The exercise's functions defined by a module, or None if it defines neither."""
    allocate = getattr(namespace, "allocate_kv_pages", None)
    schedule = getattr(namespace, "schedule_iteration", None)
    if not callable(allocate):
        allocate = None
    if not callable(schedule):
        schedule = None
    if allocate is None and schedule is None:
        return None
    return LearnerSolution(source, allocate, schedule)


def learner_factory(schedule_iteration: ScheduleIteration, policy: str) -> SchedulerFactory:
    """A scheduler factory that runs ``schedule_iteration`` under ``policy``."""

    def build(limits: Limits) -> LearnerScheduler:
        return LearnerScheduler(limits, schedule_iteration, policy)

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


class LearnerRaised(Exception):
    """The learner's ``schedule_iteration`` raised; the verdict names it, not ``schedule()``."""

    call = "schedule_iteration"


class LearnerScheduler:
    """Drives a learner's ``schedule_iteration`` through the scheduler protocol."""

    def __init__(self, limits: Limits, schedule_iteration: ScheduleIteration, policy: str) -> None:
        self.policy = policy
        self._limits = limits
        self._schedule_iteration = schedule_iteration
        self._state = initial_state(limits)
        self._pending: tuple[dict[str, Any], StepOutcome] | None = None
        self._outputs: dict[str, int] = {}  # kvsched's own: the learner may change its copy's

    def add_request(self, request: Request) -> None:
        self._outputs[request.id] = request.output_tokens
        self._state["waiting"].append(
            {
                "id": request.id,
                "arrival": request.arrival,
                "prompt_tokens": request.prompt_tokens,
                "output_tokens": request.output_tokens,
                "generated": 0,
                "pages": [],
            }
        )

    def schedule(self) -> ScheduledBatch:
        before = self._state
        given = _copy_state(before)
        given["iteration"] = before["iteration"] + 1
        limits = {
            "batch_limit": self._limits.batch_limit,
            "page_size": self._limits.page_size,
            "pool_pages": self._limits.pool_pages,
        }
        try:
            returned = self._schedule_iteration(given, limits, self.policy)
        except Exception as error:
            cause = likely_cause(given, self._limits.page_size, self._limits.pool_pages)
            raise LearnerRaised(cause) from error
        after = _readable_state(returned)
        after = _copy_state(after)  # the learner may keep and change what it returned
        after["iteration"] = given["iteration"]
        batch, outcome = _decision(before, after, self._outputs)
        self._pending = (after, outcome)
        return batch

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        # The learner already decoded inside schedule_iteration; the engine's tokens are the
        # decode entries read off its state, so there is nothing left to apply.
        if self._pending is None:
            raise LearnerStateError("update_from_output() called before schedule()")
        self._state, outcome = self._pending
        self._pending = None
        return outcome


def _decision(
    before: dict[str, Any], after: dict[str, Any], outputs: dict[str, int]
) -> tuple[ScheduledBatch, StepOutcome]:
    """What the learner decided in one iteration, read off the two states."""
    old_finished = after["finished"][: len(before["finished"])]
    if [r["id"] for r in old_finished] != [r["id"] for r in before["finished"]]:
        raise LearnerStateError(
            "state['finished'] lost or reordered requests that had finished earlier; append "
            "newly finished requests at its end and leave the rest as they were"
        )
    newly_finished = after["finished"][len(before["finished"]) :]
    for record in newly_finished:
        if not record["pages"] and record.get("prompt_tokens", 0) + record["generated"] > 0:
            raise LearnerStateError(
                f"request '{record['id']}' finished with an empty 'pages' list; leave a finished "
                "request's pages as they were, since they tell which pages it gave back "
                "(spec/learner.md, 2.2)"
            )
    generated_before: dict[str, int] = {}
    for key in ("waiting", "running", "finished"):
        for record in before[key]:
            generated_before[record["id"]] = record["generated"]

    # The batch in admission order: earlier members first, as they stood before, then newcomers.
    now = {r["id"]: r for r in after["running"] + newly_finished}
    was_running = [r["id"] for r in before["running"]]
    queue = [r["id"] for r in before["waiting"]]
    # Admission takes from the front of the queue, so the queue's order is the admission order,
    # whether a newcomer is still running or already finished (a one-token request).
    newcomers = [rid for rid in now if rid not in was_running]
    admitted = [rid for rid in queue if rid in newcomers]
    admitted += [rid for rid in newcomers if rid not in admitted]
    batch = [now[rid] for rid in was_running if rid in now] + [now[rid] for rid in admitted]

    decode: list[str] = []
    for record in batch + after["waiting"]:
        grown = record["generated"] - generated_before.get(record["id"], 0)
        if grown < 0:
            raise LearnerStateError(
                f"request '{record['id']}': 'generated' went down from "
                f"{generated_before[record['id']]} to {record['generated']}; it only counts up"
            )
        if grown > (output := outputs.get(record["id"], 0)) + 1:  # a cheap int, costly entries
            raise LearnerStateError(
                f"request '{record['id']}': 'generated' grew by {grown} in one iteration, past "
                f"its whole output ({output} tokens) and one more; each iteration makes one token"
            )
        decode.extend([record["id"]] * grown)  # two tokens in one iteration show as two entries

    # Requests listing pages while waiting are reported too, so the monitor can see them (PAGE-4).
    holders = batch + [r for r in after["waiting"] if r["pages"]]
    page_tables = {r["id"]: tuple(r["pages"]) for r in holders}
    outcome = StepOutcome(
        finished=tuple(r["id"] for r in newly_finished),
        freed={r["id"]: tuple(r["pages"]) for r in newly_finished},
        free_pages=len(after["free_pages"]),
    )
    return ScheduledBatch(tuple(admitted), tuple(decode), page_tables), outcome


def _readable_state(state: Any) -> dict[str, Any]:
    """The returned state if it has the shape of spec/learner.md, else a LearnerStateError."""
    if state is None:
        raise LearnerStateError(
            "schedule_iteration returned None; it must return the new state "
            "(did you forget `return state`?)"
        )
    if not isinstance(state, dict):
        raise LearnerStateError(
            f"schedule_iteration must return the state dict, got {type(state).__name__}"
        )
    for key in STATE_KEYS:
        if key not in state:
            raise LearnerStateError(f"the returned state has no key '{key}'")
        if not isinstance(state[key], list):
            raise LearnerStateError(
                f"state['{key}'] must be a list, got {type(state[key]).__name__}"
            )
    for page in state["free_pages"]:
        if not _is_int(page):
            raise LearnerStateError(f"state['free_pages'] holds {page!r}, not a page id (an int)")
    for key in ("waiting", "running", "finished"):
        for index, record in enumerate(state[key]):
            _check_record(record, f"state['{key}'][{index}]")
    return state


def _check_record(record: Any, where: str) -> None:
    if not isinstance(record, dict):
        raise LearnerStateError(f"{where} must be a request dict, got {type(record).__name__}")
    if not isinstance(record.get("id"), str):
        raise LearnerStateError(f"{where} has no string 'id'")
    label = f"{where} (request '{record['id']}')"
    if not _is_int(record.get("generated")):
        raise LearnerStateError(
            f"{label}: 'generated' must be an int, got {record.get('generated')!r}"
        )
    pages = record.get("pages")
    if not isinstance(pages, list) or not all(_is_int(p) for p in pages):
        raise LearnerStateError(
            f"{label}: 'pages' must be a list of page ids (ints), got {pages!r}"
        )


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


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy, fast for the state's usual shape (lists of flat request dicts).

    ``copy.deepcopy`` of a state with a thousand finished requests dominated a run at realistic
    sizes; ints, strings and lists of page ids are copied directly, anything else deeply.
    """
    return {key: _copy_value(value) for key, value in state.items()}


def _copy_value(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is list:
        if all(type(item) is int for item in value):
            return value.copy()
        return [_copy_record(item) if type(item) is dict else _copy_value(item) for item in value]
    if kind is dict:
        return {key: _copy_value(item) for key, item in value.items()}
    return copy.deepcopy(value)


def _copy_record(record: dict[Any, Any]) -> dict[Any, Any]:
    """A request dict: flat values and a list of page ids, copied without recursion."""
    copied = record.copy()
    for key, item in copied.items():
        kind = type(item)
        if kind is list and all(type(page) is int for page in item):
            copied[key] = item.copy()
        elif kind not in _ATOMIC:
            copied[key] = _copy_value(item)
    return copied


_ATOMIC = (int, str, bool, float, type(None))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
