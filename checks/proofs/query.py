"""Asking Z3 one question under a time limit, and reading its answer honestly (spec/proofs.md).

A claim is *proved* only when Z3 answers ``unsat`` for its negation. ``sat`` means *refuted*: Z3
built a counterexample. Anything else (a timeout, a cancelled search, an incomplete theory) is
*not proved*, and never counts as success. Z3 answer times vary by orders of magnitude between
runs and machines, so every question carries a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import z3

PROVED = "proved"
REFUTED = "refuted"
NOT_PROVED = "not proved"


@dataclass(frozen=True)
class Answer:
    """Z3's verdict on one claim; ``model`` is the counterexample when the claim was refuted."""

    verdict: str
    seconds: float
    reason: str = ""
    """Why Z3 gave up ("timeout", "canceled", ...) when the verdict is NOT_PROVED."""
    model: Any = None


def prove(hypotheses: Iterable[Any], claim: Any, timeout_s: float) -> Answer:
    """Is ``claim`` true in every model of ``hypotheses``? Asks Z3 for a model of the negation."""
    solver = new_solver(timeout_s)
    solver.add(*hypotheses)
    return prove_with(solver, claim)


def prove_with(solver: Any, claim: Any) -> Answer:
    """Like :func:`prove`, on a solver already holding the hypotheses (which it keeps)."""
    solver.push()
    solver.add(z3.Not(claim))
    answer = _ask(solver, on_sat=REFUTED, on_unsat=PROVED)
    solver.pop()
    return answer


def exhibit(solver: Any, claim: Any) -> Answer:
    """Is ``claim`` satisfiable together with the solver's hypotheses? PROVED by a model.

    The guard against vacuous proofs: hypotheses that contradict each other prove anything.
    """
    solver.push()
    solver.add(claim)
    answer = _ask(solver, on_sat=PROVED, on_unsat=REFUTED)
    solver.pop()
    return answer


def new_solver(timeout_s: float) -> Any:
    solver = z3.Solver()
    # Z3 takes milliseconds; a zero timeout would mean "no limit", never what a caller wants.
    solver.set("timeout", max(1, int(timeout_s * 1000)))
    return solver


def _ask(solver: Any, on_sat: str, on_unsat: str) -> Answer:
    started = time.perf_counter()
    result = solver.check()
    seconds = time.perf_counter() - started
    if result == z3.unsat:
        return Answer(on_unsat, seconds)
    if result == z3.sat:
        return Answer(on_sat, seconds, model=solver.model())
    reason = solver.reason_unknown() or "unknown"
    # Z3 reports its own timeout as "canceled"; say what happened.
    return Answer(NOT_PROVED, seconds, reason="timeout" if "cancel" in reason else reason)
