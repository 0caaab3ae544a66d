"""Inductive safety proofs for the reference transition systems (spec/proofs.md, section 2).

The invariant is the conjunction of the state facts of :mod:`.invariant`: the catalogue's
invariants in the form the count model states them, plus the auxiliary facts that make the
conjunction *inductive*. For each fact two questions go to Z3, for a workload of ``size``
requests whose arrivals, lengths, batch limit, pool and page size are all symbolic:

- *initiation*: a valid workload's initial state satisfies the fact;
- *consecution*: from any state satisfying every fact, one iteration leads to a state satisfying
  the fact.

Both ``unsat`` (no counterexample) means the fact holds after every number of iterations. The
step facts speak about one iteration (DEC-1 counts the tokens *of* a step)
and are proved from the invariant and the transition alone. LIVE-1 follows from the progress fact
by a conclusion: once ``t`` reaches the iteration bound, every request has finished.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.invariant import BOTH, STATE_FACTS, StepFact, all_finished, each
from kvsched.checks.proofs.model import (
    ACTIVE,
    WAITING,
    Iteration,
    Rules,
    State,
    fresh_state,
    initial,
    iteration,
    successor,
)
from kvsched.checks.proofs.query import PROVED, Answer, exhibit, new_solver, prove, prove_with
from kvsched.checks.proofs.steps import STEP_FACTS
from kvsched.checks.proofs.workload import (
    PageFunction,
    SymbolicWorkload,
    abstract_pages,
    symbolic_workload,
)


def _peak_if(w: SymbolicWorkload, i: int, flag: Any) -> Any:
    return z3.If(flag, w.peak(i), 0)


def _ledgers(
    s: State, it: Iteration, n: State, w: SymbolicWorkload, value: Callable[[int], Any]
) -> Any:
    return each(
        s,
        lambda i: (
            z3.If(n.phase[i] == ACTIVE, value(i), 0)
            == z3.If(s.phase[i] == ACTIVE, value(i), 0)
            + z3.If(it.admitted[i], value(i), 0)
            - z3.If(it.finished[i], value(i), 0)
        ),
    )


def _within_commitment(s: State, it: Iteration, n: State, w: SymbolicWorkload, i: int) -> Any:
    return z3.And(
        it.pages_during[i] <= _peak_if(w, i, s.phase[i] == ACTIVE) + _peak_if(w, i, it.admitted[i]),
        n.held[i] >= 0,
        n.held[i] <= _peak_if(w, i, n.phase[i] == ACTIVE),
    )


def _chain(s: State, it: Iteration, w: SymbolicWorkload, k: int) -> Any:
    return z3.And(
        z3.Implies(it.commitments[k] <= w.pool_pages, it.commitments[k + 1] <= w.pool_pages),
        z3.Implies(it.batch_sizes[k] <= w.batch_limit, it.batch_sizes[k + 1] <= w.batch_limit),
    )


# Per-request bookkeeping of one iteration, proved before the sums over all requests: Z3 proves
# "sum of x_i = sum of y_i" in no time once it knows x_i = y_i for each i, and not at all
# (case-splitting on every request) without; see spec/proofs.md, "Lemmas".
LEMMAS: tuple[StepFact, ...] = (
    StepFact(
        "commitment-ledger",
        (),
        BOTH,
        "per request: peak if active after = peak if active before + if admitted - if finished",
        lambda s, it, n, w: _ledgers(s, it, n, w, w.peak),
    ),
    StepFact(
        "slot-ledger",
        (),
        BOTH,
        "per request: 1 if active after = 1 if active before + if admitted - if finished",
        lambda s, it, n, w: _ledgers(s, it, n, w, lambda i: z3.IntVal(1)),
    ),
    StepFact(
        "pages-within-commitment",
        (),
        BOTH,
        "per request: pages while decoding <= its peak if in the batch; after: 0 <= held <= "
        "its peak if active",
        lambda s, it, n, w: each(s, lambda i: _within_commitment(s, it, n, w, i)),
    ),
    StepFact(
        "batch-ledger",
        (),
        BOTH,
        "per request: 1 if in the batch while decoding = 1 if active before + 1 if admitted",
        lambda s, it, n, w: each(
            s,
            lambda i: (
                z3.If(it.running[i], 1, 0)
                == z3.If(s.phase[i] == ACTIVE, 1, 0) + z3.If(it.admitted[i], 1, 0)
            ),
        ),
    ),
    StepFact(
        "admission-loop",
        (),
        BOTH,
        "each admission keeps the batch within batch_limit and its commitment within the pool",
        lambda s, it, n, w: z3.And(*[_chain(s, it, w, k) for k in range(s.size)]),
    ),
)


@dataclass(frozen=True)
class Obligation:
    """One question about the transition system and Z3's answer to it."""

    fact: str
    ids: tuple[str, ...]
    kind: str  # "initiation", "consecution", "step" or "conclusion"
    answer: Answer


def invariant(s: State, w: SymbolicWorkload, policy: str) -> list[Any]:
    return [f.holds(s, w) for f in STATE_FACTS if policy in f.policies]


def prove_inductive(
    rules: Rules, size: int, rlimit: int, pages: PageFunction | None = None
) -> list[Obligation]:
    """Every obligation for ``size`` requests under ``rules``; see the module docstring."""
    pages = pages or abstract_pages()
    w = symbolic_workload(size, pages)
    facts = [f for f in STATE_FACTS if rules.policy in f.policies]
    steps = [f for f in STEP_FACTS if rules.policy in f.policies]
    results: list[Obligation] = []

    start = fresh_state(size, "s0")
    base = [*w.valid(), *initial(start, w)]
    for fact in facts:
        answer = prove(base, fact.holds(start, w), rlimit)
        results.append(Obligation(fact.name, fact.ids, "initiation", answer))

    s = fresh_state(size, "s")
    it = iteration(s, w, rules)
    nxt = successor(s, it, w, rules)
    solver = new_solver(rlimit)
    solver.add(*w.valid(), *invariant(s, w, rules.policy), *it.page_facts)
    # Each proved claim joins the hypotheses of the claims after it (sound: it was proved from
    # the ones before); a claim not proved never does.
    for lemma in LEMMAS:
        results.append(_settle(solver, lemma.name, lemma.ids, "lemma", lemma.holds(s, it, nxt, w)))
    for fact in facts:
        results.append(_settle(solver, fact.name, fact.ids, "consecution", fact.holds(nxt, w)))
    for step in steps:
        results.append(_settle(solver, step.name, step.ids, "step", step.holds(s, it, nxt, w)))
    # Not vacuous: the hypotheses admit a state mid-run, with a request active and one queued.
    busy = [s.t >= 1, z3.Or(*[p == ACTIVE for p in s.phase])]
    if size > 1:
        busy.append(z3.Or(*[p == WAITING for p in s.phase]))
    answer = exhibit(solver, z3.And(*busy))
    results.append(Obligation("hypotheses-satisfiable", (), "vacuity", answer))

    bound = w.last_arrival() + z3.Sum(list(w.output))
    conclusion = z3.Implies(s.t >= bound, all_finished(s))
    answer = prove([*w.valid(), *invariant(s, w, rules.policy)], conclusion, rlimit)
    results.append(Obligation("drains-by-bound", ("LIVE-1",), "conclusion", answer))
    return results


def _settle(solver: Any, name: str, ids: tuple[str, ...], kind: str, claim: Any) -> Obligation:
    answer = prove_with(solver, claim)
    if answer.verdict == PROVED:
        solver.add(claim)
    return Obligation(name, ids, kind, answer)
