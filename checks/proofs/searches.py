"""The synthesis questions Z3 answers: exact constraints over the unrolled model, and proofs that
no workload exists (used by :mod:`.synthesis`; spec/proofs.md, section 6)."""

from __future__ import annotations

import time

import z3

from kvsched.checks.proofs.bmc import Bounds
from kvsched.checks.proofs.compare import prove_never_later
from kvsched.checks.proofs.model import Iteration, Rules, fresh_state, initial, transition
from kvsched.checks.proofs.query import NOT_PROVED, PROVED, REFUTED, Answer, exhibit
from kvsched.checks.proofs.workload import exact_pages, symbolic_workload, workload_from_model
from kvsched.spec.workload import Workload


def no_p95_inversion(requests: int, timeout_s: float) -> Answer:
    """PROVED when no workload of ``requests`` requests makes any request wait longer under
    continuous batching than under static batching (hence no higher P95 wait)."""
    obligations = prove_never_later(requests, timeout_s)
    seconds = sum(o.answer.seconds for o in obligations)
    failed = [o for o in obligations if o.answer.verdict != PROVED]
    if not failed:
        return Answer(PROVED, seconds)
    first = failed[0].answer
    return Answer(first.verdict, seconds, first.reason or f"{failed[0].fact} not proved")


def find_reuse(
    requests: int,
    batch_limit: int,
    page_size: int,
    pool_pages: int | None,
    bounds: Bounds,
    timeout_s: float,
) -> tuple[Answer, Workload | None]:
    """A workload on which continuous batching, in some iteration k, takes more new pages than
    were free before iteration k - 1 freed its pages. Iterative deepening over k.

    REFUTED ("the claim that none exists is refuted") carries the workload; PROVED means none
    exists within ``bounds``.
    """
    deadline = time.perf_counter() + timeout_s
    w = symbolic_workload(requests, exact_pages(page_size))
    state = fresh_state(requests, "k0")
    solver = z3.Solver()
    solver.add(*w.valid(), *initial(state, w), *bounds.constrain(w), w.batch_limit == batch_limit)
    if pool_pages is not None:
        solver.add(w.pool_pages == pool_pages)
    previous: Iteration | None = None
    spent = 0.0
    for k in range(1, bounds.steps + 1):
        after = fresh_state(requests, f"k{k}")
        it, binding = transition(state, after, w, Rules("continuous"))
        solver.add(*binding)
        if previous is not None:
            # ``state`` is the state after iteration k - 1, so its held pages are after the frees.
            freed = z3.Sum([previous.pages_during[i] - state.held[i] for i in range(requests)])
            taken = z3.Sum([it.pages_during[i] - state.held[i] for i in range(requests)])
            solver.set("timeout", max(1, int((deadline - time.perf_counter()) * 1000)))
            answer = exhibit(solver, z3.And(freed > 0, taken > state.free - freed))
            spent += answer.seconds
            if answer.verdict == PROVED:  # a model: the workload exists
                return Answer(REFUTED, spent, model=answer.model), workload_from_model(
                    answer.model, w, "reuse"
                )
            if answer.verdict == NOT_PROVED:
                return Answer(NOT_PROVED, spent, answer.reason), None
        previous, state = it, after
    return Answer(PROVED, spent), None
