"""The engine model on a concrete workload, and its cross-check with the reference and monitor.

On a concrete workload every term of the model is built from values, so ``z3.simplify``
evaluates it (no solver). :func:`model_trajectory` reports each iteration in the vocabulary of
the engine's events and :func:`reference_trajectory` the same from a run of the reference
``EngineScheduler``: the tests require them equal, iteration by iteration, so the model cannot
drift from the code it proves. :func:`confirm` replays a workload Z3 found on the reference,
through the runtime monitor, and says what the monitor saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.monitor import monitor_run
from kvsched.checks.proofs.engine.design_scope import engine_scope
from kvsched.checks.proofs.engine.index_lists import Slots
from kvsched.checks.proofs.engine.step import transition
from kvsched.checks.proofs.engine.system import EngineState, EngineSystem, initial_state
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import EngineConfig, EngineScheduler
from kvsched.spec.workload import Workload, arrival_order


@dataclass(frozen=True)
class StepView:
    """One iteration as both the model and the reference's events describe it."""

    iteration: int
    admitted: tuple[str, ...]
    preempted: tuple[str, ...]
    computed: tuple[tuple[str, int], ...]
    """Tokens computed per request, sorted by id; requests computing nothing left out."""
    decoded: tuple[str, ...]
    """Sorted by id."""
    active: tuple[str, ...]
    pages: tuple[tuple[str, int], ...]
    """Pages each request of the batch holds once ``schedule()`` returns, in batch order."""
    finished: tuple[str, ...]
    free_pages: int
    waiting: tuple[str, ...]
    thrash: bool = False
    """The model's LIVE-3 (the reference's events carry none: the monitor judges them)."""


def concrete_system(workload: Workload, config: EngineConfig) -> EngineSystem:
    engine_scope(config).require("the engine Z3 model")
    requests = arrival_order(workload.requests)
    budget = config.token_budget
    assert budget is not None  # the scope requires one
    return EngineSystem(
        arrival=tuple(z3.IntVal(r.arrival) for r in requests),
        prompt=tuple(z3.IntVal(r.prompt_tokens) for r in requests),
        output=tuple(z3.IntVal(r.output_tokens) for r in requests),
        batch_limit=z3.IntVal(workload.limits.batch_limit),
        pool_pages=z3.IntVal(workload.limits.pool_pages),
        token_budget=z3.IntVal(budget),
        watermark=z3.IntVal(config.watermark_pages),
        admit_after_preemption=z3.BoolVal(config.admit_after_preemption),
        page_size=workload.limits.page_size,
        batching=config.batching,
        ids=tuple(r.id for r in requests),
    )


def model_trajectory(
    workload: Workload, config: EngineConfig, iterations: int
) -> tuple[StepView, ...]:
    """The model run for ``iterations`` iterations, or until every request finished."""
    s = concrete_system(workload, config)
    state, views = initial_state(s), []
    for _ in range(iterations):
        if all(_int(p) == 3 for p in state.phase):
            break
        it, after = transition(s, state)
        ids = s.ids
        named = _namer(ids)
        active = named(it.running)
        order = sorted(range(s.size), key=lambda i: ids[i])
        views.append(
            StepView(
                iteration=_int(it.number),
                admitted=named(it.admitted),
                preempted=named(it.preempted),
                computed=tuple(
                    (ids[i], _int(it.computed[i])) for i in order if _int(it.computed[i])
                ),
                decoded=tuple(ids[i] for i in order if z3.is_true(z3.simplify(it.decoded[i]))),
                active=active,
                pages=tuple((rid, _int(it.held[ids.index(rid)])) for rid in active),
                finished=tuple(ids[i] for i in order if z3.is_true(z3.simplify(it.finished[i]))),
                free_pages=_int(after.free),
                waiting=named(it.waiting),
                thrash=z3.is_true(z3.simplify(it.thrash)),
            )
        )
        state = _simplified(after)
    return tuple(views)


def reference_trajectory(
    workload: Workload, config: EngineConfig, iterations: int
) -> tuple[StepView, ...]:
    target = EngineScheduler.configured(config)
    result = run(workload, target, properties=config.properties(), max_iterations=iterations)
    return tuple(
        StepView(
            iteration=e.iteration,
            admitted=tuple(e.admitted),
            preempted=tuple(e.preempted),
            computed=tuple(sorted((rid, n) for rid, n in (e.computed or {}).items() if n)),
            decoded=tuple(sorted(e.decoded)),
            active=tuple(e.active),
            pages=tuple((rid, len(e.page_tables.get(rid, ()))) for rid in e.active),
            finished=tuple(sorted(e.finished)),
            free_pages=e.free_pages,
            waiting=tuple(e.waiting),
        )
        for e in result.events
    )


@dataclass(frozen=True)
class Confirmation:
    """What the reference and the monitor make of a workload Z3 found."""

    invariant: str
    """The monitor's first finding on the reference run ("" if none)."""
    iteration: int
    message: str
    same_schedule: bool
    """The model and the reference scheduled the run identically, iteration by iteration."""
    drained: bool
    """The reference run drained within ``iterations`` iterations."""


def confirm(
    workload: Workload, config: EngineConfig, iterations: int, compare: int
) -> Confirmation:
    """Run the reference ``iterations`` iterations through the monitor; compare its schedule
    with the model's over the first ``compare`` (the model, evaluated term by term, is slow)."""
    target = EngineScheduler.configured(config)
    properties = config.properties()
    result = run(workload, target, properties=properties, max_iterations=iterations)
    finding = monitor_run(result, properties)
    upto = min(compare, len(result.events))
    model = [_plain(v) for v in model_trajectory(workload, config, upto)]
    same = model == list(reference_trajectory(workload, config, upto))
    if finding is None:
        return Confirmation("", 0, "", same, result.drained)
    return Confirmation(finding.invariant, finding.iteration, finding.message, same, result.drained)


def _namer(ids: tuple[str, ...]) -> Callable[[Slots], tuple[str, ...]]:
    def named(slots: Slots) -> tuple[str, ...]:
        return tuple(ids[_int(slots.items[k])] for k in range(_int(slots.length)))

    return named


def _plain(view: StepView) -> StepView:
    return StepView(**{**view.__dict__, "thrash": False})


def _int(term: Any) -> int:
    return int(z3.simplify(term).as_long())


def _simplified(state: EngineState) -> EngineState:
    def each(values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(z3.simplify(v) for v in values)

    return EngineState(
        time=z3.simplify(state.time),
        free=z3.simplify(state.free),
        phase=each(state.phase),
        generated=each(state.generated),
        computed=each(state.computed),
        held=each(state.held),
        running=state.running.simplified(),
        waiting=state.waiting.simplified(),
        most=each(state.most),
        stamp=each(state.stamp),
        progress=z3.simplify(state.progress),
    )
