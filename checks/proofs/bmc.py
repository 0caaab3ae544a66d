"""Unrolling the transition system: bounded checks of LIVE-1 and counterexamples.

Induction (:mod:`.induction`) proves safety for any number of iterations. Unrolling the
transition ``k`` times from the initial state answers what induction does not:

- :func:`check_drains` is bounded model checking of LIVE-1 for small workloads, independent of
  the progress fact the induction proof of LIVE-1 rests on;
- :func:`find_violation` searches a deliberately broken scheduler for a real counterexample: a
  workload from the initial state, not a counterexample to induction that may be unreachable.
  The workload is then replayed through the model without the solver (:mod:`.replay`).

Unrolling grows with every iteration (each copies the whole state), so these take small sizes.
Page sizes stay symbolic here too: the exact ceiling with the page size a Z3 constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.model import (
    FINISHED,
    Iteration,
    Rules,
    State,
    fresh_state,
    initial,
    transition,
)
from kvsched.checks.proofs.query import (
    EXHAUSTED,
    NOT_PROVED,
    PROVED,
    REFUTED,
    Answer,
    exhibit,
    limit,
    prove,
)
from kvsched.checks.proofs.simulate import first_violation
from kvsched.checks.proofs.steps import FACT_IDS, catalogue_checks
from kvsched.checks.proofs.workload import (
    SymbolicWorkload,
    exact_pages,
    symbolic_workload,
    workload_from_model,
)
from kvsched.spec.workload import Workload


@dataclass(frozen=True)
class Unrolling:
    workload: SymbolicWorkload
    states: tuple[State, ...]
    iterations: tuple[Iteration, ...]
    constraints: tuple[Any, ...]


def unroll(w: SymbolicWorkload, rules: Rules, steps: int) -> Unrolling:
    """``steps`` iterations from the initial state, each state a fresh set of constants."""
    states = [fresh_state(w.size, "k0")]
    constraints = [*w.valid(), *initial(states[0], w)]
    iterations = []
    for k in range(1, steps + 1):
        states.append(fresh_state(w.size, f"k{k}"))
        it, binding = transition(states[k - 1], states[k], w, rules)
        iterations.append(it)
        constraints += binding
    return Unrolling(w, tuple(states), tuple(iterations), tuple(constraints))


@dataclass(frozen=True)
class Bounds:
    """How large a symbolic workload may be, so that unrolling to its iteration bound is small."""

    requests: int = 3
    max_arrival: int = 3
    max_output: int = 3
    max_prompt: int = 8

    @property
    def steps(self) -> int:
        """The largest iteration bound (3.6) a workload within these bounds can have."""
        return self.max_arrival + self.requests * self.max_output

    def constrain(self, w: SymbolicWorkload) -> list[Any]:
        facts = []
        for i in range(w.size):
            facts += [w.arrival[i] <= self.max_arrival, w.output[i] <= self.max_output]
            facts.append(w.prompt[i] <= self.max_prompt)
        return facts


def check_drains(rules: Rules, bounds: Bounds, rlimit: int) -> Answer:
    """LIVE-1 by bounded model checking: every workload within ``bounds``, any page size, has
    drained by its iteration bound. A refutation carries the model of a starving workload."""
    w = symbolic_workload(bounds.requests, exact_pages(z3.Int("page_size")))
    u = unroll(w, rules, bounds.steps)
    bound = w.last_arrival() + z3.Sum(list(w.output))
    drained = z3.And(
        *[
            z3.Implies(bound == k, z3.And(*[p == FINISHED for p in u.states[k].phase]))
            for k in range(bounds.steps + 1)
        ]
    )
    return prove([*u.constraints, *bounds.constrain(w)], drained, rlimit)


@dataclass(frozen=True)
class Counterexample:
    """A workload on which ``rules`` break ``invariant`` (via model fact ``fact``)."""

    invariant: str
    fact: str
    iteration: int
    workload: Workload
    confirmed: bool
    """The model, replayed on the workload without the solver, breaks the catalogue; the fact
    and iteration are the replay's first violation."""


def find_violation(
    rules: Rules, bounds: Bounds, rlimit: int, max_page_size: int = 4
) -> tuple[Answer, Counterexample | None]:
    """Search workloads within ``bounds`` for a catalogue invariant that ``rules`` break.

    Iterative deepening: iteration k is searched once no workload breaks anything before it, so
    the shallowest counterexample comes first and each query stays small. ``rlimit`` is the
    budget for the whole search, in Z3 resource units: each depth gets what the ones before left.
    """
    page_size = z3.Int("page_size")
    w = symbolic_workload(bounds.requests, exact_pages(page_size))
    solver = z3.Solver()
    state = fresh_state(w.size, "k0")
    solver.add(*w.valid(), *initial(state, w), *bounds.constrain(w), page_size <= max_page_size)
    spent, used = 0.0, 0
    for k in range(1, bounds.steps + 1):
        after = fresh_state(w.size, f"k{k}")
        it, binding = transition(state, after, w, rules)
        solver.add(*binding)
        checks = catalogue_checks(rules.policy, w, state, it, after)
        if used >= rlimit:
            return Answer(NOT_PROVED, spent, EXHAUSTED, units=used), None
        limit(solver, rlimit - used)
        answer = exhibit(solver, z3.Or(*[z3.Not(claim) for *_, claim in checks]))
        spent, used = spent + answer.seconds, used + answer.units
        if answer.verdict == NOT_PROVED:
            return Answer(NOT_PROVED, spent, answer.reason, units=used), None
        if answer.verdict == PROVED:  # a model: a workload breaking something in iteration k
            workload = workload_from_model(answer.model, w, f"counterexample-{rules.policy}")
            replayed = first_violation(workload, rules)
            if replayed is None:
                return Answer(REFUTED, spent, model=answer.model, units=used), Counterexample(
                    "", "", k, workload, confirmed=False
                )
            iteration_, fact = replayed
            ids = FACT_IDS[fact]
            return Answer(REFUTED, spent, model=answer.model, units=used), Counterexample(
                ids[0], fact, iteration_, workload, confirmed=True
            )
        state = after
    return Answer(PROVED, spent, units=used), None
