"""Continuous batching never starts a request later than static batching (spec/proofs.md, 4).

Both reference transition systems run side by side on the same symbolic workload, one iteration
at a time. The *dominance* invariant says that at every time ``t`` continuous batching is ahead
on every request: it has generated at least as many of its tokens, and a request static batching
has admitted, continuous batching has admitted too, in the same iteration or earlier. Z3 proves it
inductive for ``size`` requests (any arrivals, lengths, limits, page size), on top of the two
invariants of :mod:`.induction`, which are proved again here because it rests on them.

Consequence: every request waits no longer and finishes no later under continuous batching, so
its P50, P95, mean and max wait and its iteration count are never higher, on any workload of
this model. Where continuous batching does lose is elsewhere (``kvsched synth continuous-loses``).
"""

from __future__ import annotations

from typing import Any

import z3

from kvsched.checks.proofs.induction import LEMMAS, Obligation, invariant, prove_inductive
from kvsched.checks.proofs.model import (
    ACTIVE,
    WAITING,
    Rules,
    State,
    fresh_state,
    initial,
    iteration,
    successor,
)
from kvsched.checks.proofs.query import PROVED, exhibit, new_solver, prove, prove_with
from kvsched.checks.proofs.workload import abstract_pages, symbolic_workload

DOMINANCE = (
    "at every time t, for every request: continuous has generated at least as many tokens as "
    "static, and if static has admitted it, continuous admitted it no later"
)


def dominates(static: State, continuous: State) -> Any:
    return z3.And(
        static.t == continuous.t,
        *[ahead_on(static, continuous, i) for i in range(static.size)],
    )


def ahead_on(static: State, continuous: State, i: int) -> Any:
    """Continuous batching is ahead of static batching on request ``i``."""
    return z3.And(
        continuous.generated[i] >= static.generated[i],
        z3.Implies(
            static.phase[i] != WAITING,
            z3.And(continuous.phase[i] != WAITING, continuous.start[i] <= static.start[i]),
        ),
    )


def prove_never_later(
    size: int, rlimit: int, premises: list[Obligation] | None = None
) -> list[Obligation]:
    """The obligations of the dominance proof, including its premises: the obligations of both
    single-policy induction proofs for ``size`` requests (proved here unless passed in)."""
    static, continuous = Rules("static"), Rules("continuous")
    if premises is None:
        premises = [o for r in (static, continuous) for o in prove_inductive(r, size, rlimit)]
    results = [o for o in premises if o.kind in ("initiation", "consecution", "lemma", "vacuity")]
    w = symbolic_workload(size, abstract_pages())
    s0, c0 = fresh_state(size, "s0"), fresh_state(size, "c0")
    answer = prove([*w.valid(), *initial(s0, w), *initial(c0, w)], dominates(s0, c0), rlimit)
    results.append(Obligation("dominance", (), "initiation", answer))

    s, c = fresh_state(size, "s"), fresh_state(size, "c")
    its, itc = iteration(s, w, static), iteration(c, w, continuous)
    ns, nc = successor(s, its, w, static), successor(c, itc, w, continuous)
    solver = new_solver(rlimit)
    solver.add(*w.valid(), *invariant(s, w, "static"), *invariant(c, w, "continuous"))
    solver.add(*its.page_facts, *itc.page_facts, dominates(s, c))
    for lemma in LEMMAS:
        for before, it, after in ((s, its, ns), (c, itc, nc)):
            claim = lemma.holds(before, it, after, w)
            answer = prove_with(solver, claim)
            if answer.verdict == PROVED:
                solver.add(claim)
            results.append(Obligation(lemma.name, (), "lemma", answer))
    # Request by request, each proved claim joining the hypotheses: one query for all requests
    # at once costs Z3 far more, and exhausts its budget from about 32 requests on.
    for i in range(size):
        claim = ahead_on(ns, nc, i)
        answer = prove_with(solver, claim)
        if answer.verdict == PROVED:
            solver.add(claim)
        results.append(Obligation("dominance", (), "consecution", answer))
    # Not vacuous: a state where continuous is strictly ahead, running what static still queues.
    ahead = z3.Or(*[z3.And(s.phase[i] == WAITING, c.phase[i] == ACTIVE) for i in range(size)])
    results.append(Obligation("dominance", (), "vacuity", exhibit(solver, ahead)))
    return results
