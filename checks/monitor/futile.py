"""LIVE-4: no preemption for nothing (spec/semantics.md, section 8.1).

A running request that cannot get the pages for its step preempts victims until it fits, or
preempts itself (vLLM v1's running loop, nano-vllm's decode loop, the reference's
``EngineScheduler._run``). Each preemption gives the victim's pages back in the same schedule,
so a correct engine stops preempting as soon as the pages free cover the step it is trying to
take. An engine whose preemptions do not make room in the step that made them (vLLM's deferred
frees, fenced until the step in flight is processed: vLLM #49674) sees no more free pages after
each victim and goes on down the running queue, preempting request after request, often ending
with the request that started the cascade: an iteration that preempts and computes nothing.

Who started a cascade is not in the log, so the rule is stated where the log settles it. In an
iteration that preempts and in which nothing is computed and no token produced, every request that
could have started the last preemption either was its victim (a request that preempts itself is
preempted last: the loop stops there) or is still in the batch, computing nothing. The most pages
any of them could take in one step is bounded by what it holds and by PAGE-1 and DEC-1: its KV
never passes its prompt plus its output so far plus the token the step produces, and its table
holds ``ceil(kv / page_size)`` pages (its reservation, reserving ahead). If the pages free just
before the last preemption, less the declared watermark, already covered that most for every one of
them, whichever request started it would have fitted without it: the last preemption, and the
iteration with it, made no progress a correct engine could not have made. Pages freed by the
earlier preemptions count as free there, as a correct pool counts them (PAGE-3), except under
asynchronous scheduling, where no victim's pages are room in their own schedule and neither are
those the update before gave back: they wait for the step in flight (PAGE-7).

What it does not flag, on purpose: a cascade in an iteration that computes something (requests
ahead of the one that started it ran), since engines that preempt ahead for several steps
(SGLang's retraction) preempt more than one step needs there; LIVE-3 and LIVE-1 bound those. A
request that preempts itself because even the victims' pages were too few for its chunk (vLLM's
priority victim chosen below it) is clean: the pages before its preemption fell short of its own
most. A steady line that computes leaves it nothing to judge.
"""

from __future__ import annotations

from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.registry import Monitor, Steady, per_iteration
from kvsched.checks.monitor.steady_line import SteadyLine
from kvsched.spec.events import IterationEvent
from kvsched.spec.text import plural
from kvsched.spec.workload import pages_for


def most_pages_for_a_step(monitor: Monitor, request_id: str, held: int) -> int | None:
    """The most pages ``request_id``, holding ``held``, could take in one step: up to the
    pages of its prompt plus its output so far plus one token (PAGE-1, DEC-1), or its
    reservation when the target reserves ahead. ``None`` for a request the monitor no longer
    follows."""
    record = monitor.requests.live.get(request_id)
    if record is None:
        return None
    if monitor.properties.reserve_ahead:
        most = record.reservation
    else:
        # DEC-1 lets a step's KV reach the prompt plus the output so far, plus the token the
        # step produces (an empty prompt's start position is that one). The workload's prompt,
        # not a folded one: a fold only lowers what KV may cover, and a bound too high only
        # spares an engine.
        tokens = record.request.prompt_tokens + record.generated + 1
        most = pages_for(tokens, monitor.limits.page_size)
    return max(0, most - held)


def _computes(monitor: Monitor, line: SteadyLine) -> bool:
    # An iteration that computes leaves the rule nothing to judge, however many it preempted.
    return not line.preempted or line.computed > 0


@per_iteration("decode", "LIVE-4", steady=Steady(line=_computes))
def no_preemption_for_nothing(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """LIVE-4, once the iteration's tokens are counted: an iteration that preempted and computed
    nothing needed its last preemption."""
    if not event.preempted or event.decoded or any(monitor.computed.values()):
        return None
    if "LIVE-4" not in monitor.applicable:
        return None
    last = event.preempted[-1]
    # The pages the last victim gave back in this schedule: every page it held (PAGE-4).
    given: set[int] = set()
    after = False
    for op in event.schedule:
        if op.request != last:
            continue
        if op.kind == "preempt":
            after, given = True, set()
        elif op.kind == "free" and after:
            given.update(op.pages)
        elif op.kind == "admit":
            after = False
    holders = monitor.pages.holders
    gone = given
    if monitor.properties.async_scheduling:
        # No victim's pages are room in its own schedule: they wait for the step in flight
        # (PAGE-7), so every victim's, not only the last one's, are counted out.
        victims = set(event.preempted)
        gone = {p for op in event.schedule if op.kind == "free" and op.request in victims
                for p in op.pages}  # fmt: skip
    back = sum(1 for page in gone if page not in holders)  # free now because they left
    # Pages allocated after the last preemption are not free now either: counting them out
    # only lowers the room, so the rule errs towards the engine.
    room = monitor.pages.room(event.iteration) - back - monitor.properties.watermark_pages
    need = most_pages_for_a_step(monitor, last, len(given))
    if need is None or room < need:
        return None
    starter, most = last, need
    for rid in monitor.requests.active:
        record = monitor.requests.live.get(rid)
        other = None if record is None else most_pages_for_a_step(monitor, rid, len(record.table))
        if other is None or room < other:
            return None
        if other > most:
            starter, most = rid, other
    n = event.iteration
    message = (
        f"iteration {n} preempted {request_list(event.preempted)} and computed nothing, yet "
        f"{plural(room, 'page')} {'was' if room == 1 else 'were'} free before {last!r} was "
        f"preempted last, enough for the largest step any request that could have needed them "
        f"could take ({plural(most, 'page')}, {starter!r}): the preemptions made room the "
        "iteration did not use, a cascade with no progress (as deferred frees cause)"
    )
    return Finding("LIVE-4", n, message, requests=tuple(event.preempted))
