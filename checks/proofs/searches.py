"""The synthesis questions Z3 answers: exact constraints over the unrolled model, and proofs that
no workload exists (used by :mod:`.synthesis`; spec/proofs.md, section 6)."""

from __future__ import annotations

import z3

from kvsched.checks.proofs.bmc import Bounds
from kvsched.checks.proofs.compare import prove_never_later
from kvsched.checks.proofs.model import Iteration, Rules, fresh_state, initial, transition
from kvsched.checks.proofs.query import (
    EXHAUSTED,
    NOT_PROVED,
    PROVED,
    REFUTED,
    Answer,
    exhibit,
    limit,
)
from kvsched.checks.proofs.workload import exact_pages, symbolic_workload, workload_from_model
from kvsched.spec.workload import Workload


def no_p95_inversion(requests: int, rlimit: int) -> Answer:
    """PROVED when no workload of ``requests`` requests makes any request wait longer under
    continuous batching than under static batching (hence no higher P95 wait)."""
    obligations = prove_never_later(requests, rlimit)
    seconds = sum(o.answer.seconds for o in obligations)
    used = sum(o.answer.units for o in obligations)
    failed = [o for o in obligations if o.answer.verdict != PROVED]
    if not failed:
        return Answer(PROVED, seconds, units=used)
    first = failed[0].answer
    why = first.reason or f"{failed[0].fact} not proved"
    return Answer(first.verdict, seconds, why, units=used)


def find_reuse(
    requests: int,
    batch_limit: int,
    page_size: int,
    pool_pages: int | None,
    bounds: Bounds,
    rlimit: int,
) -> tuple[Answer, Workload | None]:
    """A workload on which continuous batching, in some iteration k, takes more new pages than
    were free before iteration k - 1 freed its pages. Iterative deepening over k.

    REFUTED ("the claim that none exists is refuted") carries the workload; PROVED means none
    exists within ``bounds``. ``rlimit`` (Z3 resource units) is the budget of the whole search.
    """
    w = symbolic_workload(requests, exact_pages(page_size))
    state = fresh_state(requests, "k0")
    solver = z3.Solver()
    solver.add(*w.valid(), *initial(state, w), *bounds.constrain(w), w.batch_limit == batch_limit)
    if pool_pages is not None:
        solver.add(w.pool_pages == pool_pages)
    previous: Iteration | None = None
    spent, used = 0.0, 0
    for k in range(1, bounds.steps + 1):
        after = fresh_state(requests, f"k{k}")
        it, binding = transition(state, after, w, Rules("continuous"))
        solver.add(*binding)
        if previous is not None:
            # ``state`` is the state after iteration k - 1, so its held pages are after the frees.
            freed = z3.Sum([previous.pages_during[i] - state.held[i] for i in range(requests)])
            taken = z3.Sum([it.pages_during[i] - state.held[i] for i in range(requests)])
            if used >= rlimit:
                return Answer(NOT_PROVED, spent, EXHAUSTED, units=used), None
            limit(solver, rlimit - used)
            answer = exhibit(solver, z3.And(freed > 0, taken > state.free - freed))
            spent, used = spent + answer.seconds, used + answer.units
            if answer.verdict == PROVED:  # a model: the workload exists
                found = Answer(REFUTED, spent, model=answer.model, units=used)
                return found, workload_from_model(answer.model, w, "reuse")
            if answer.verdict == NOT_PROVED:
                return Answer(NOT_PROVED, spent, answer.reason, units=used), None
        previous, state = it, after
    return Answer(PROVED, spent, units=used), None
