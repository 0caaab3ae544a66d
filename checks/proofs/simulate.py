"""The model run on a real workload, without a solver (spec/proofs.md, section 3).

On a concrete workload every term of the model is built from values, so ``z3.simplify`` evaluates
it: the model becomes a simulator. :func:`trajectory` reports what it does in the vocabulary of
the engine's events, so tests can require it to equal the reference run exactly (the model cannot
drift from the code it claims to prove); :func:`first_violation` replays a counterexample found by
bounded model checking to confirm it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.model import FINISHED, Iteration, Rules, State, iteration, successor
from kvsched.checks.proofs.steps import catalogue_checks
from kvsched.checks.proofs.workload import SymbolicWorkload, concrete_workload
from kvsched.reference.engine import iteration_bound
from kvsched.spec.workload import Workload


@dataclass(frozen=True)
class ModelIteration:
    """One iteration of the model on a concrete workload, in the vocabulary of the events."""

    iteration: int
    admitted: tuple[str, ...]
    active: tuple[str, ...]
    pages: dict[str, int]
    """Pages each active request holds while it decodes (the event's page-table sizes)."""
    finished: tuple[str, ...]
    free_pages: int
    waiting: tuple[str, ...]


def trajectory(workload: Workload, rules: Rules) -> tuple[ModelIteration, ...]:
    """Run the Z3 model on ``workload`` until it drains or reaches the iteration bound (3.6)."""
    steps = []
    for w, _, it, after in _concrete_steps(workload, rules):
        running = _ids(w, it.running)
        steps.append(
            ModelIteration(
                iteration=_value(it.number),
                admitted=_ids(w, it.admitted),
                active=running,
                pages={
                    w.ids[i]: _value(it.pages_during[i])
                    for i in range(w.size)
                    if _true(it.running[i])
                },
                finished=_ids(w, it.finished),
                free_pages=_value(after.free),
                waiting=tuple(r for r in _ids(w, it.eligible) if r not in running),
            )
        )
    return tuple(steps)


def first_violation(workload: Workload, rules: Rules) -> tuple[int, str] | None:
    """The first (iteration, fact) of the catalogue the model breaks on ``workload``, if any."""
    for w, before, it, after in _concrete_steps(workload, rules):
        for name, _, claim in catalogue_checks(rules.policy, w, before, it, after):
            if not _true(claim):
                return _value(it.number), name
    return None


def _concrete_steps(
    workload: Workload, rules: Rules
) -> Iterator[tuple[SymbolicWorkload, State, Iteration, State]]:
    # Every term is built from values, so z3.simplify evaluates it: no solver, no search.
    w = concrete_workload(workload)
    zero = z3.IntVal(0)
    none = tuple(zero for _ in range(w.size))
    state = State(zero, w.pool_pages, zero, none, none, none, none, none)
    for _ in range(iteration_bound(workload)):
        if all(_value(p) == FINISHED for p in state.phase):
            return
        it = iteration(state, w, rules)
        after = _evaluate(successor(state, it, w, rules))
        yield w, state, it, after
        state = after


def _evaluate(s: State) -> State:
    def each(terms: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(z3.simplify(t) for t in terms)

    return State(
        z3.simplify(s.t),
        z3.simplify(s.free),
        z3.simplify(s.committed),
        each(s.phase),
        each(s.generated),
        each(s.held),
        each(s.start),
        each(s.finish),
    )


def _ids(w: SymbolicWorkload, flags: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(w.ids[i] for i, flag in enumerate(flags) if _true(flag))


def _value(term: Any) -> int:
    return int(z3.simplify(term).as_long())


def _true(term: Any) -> bool:
    return bool(z3.is_true(z3.simplify(term)))
