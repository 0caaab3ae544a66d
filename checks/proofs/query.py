"""Asking Z3 one question under a resource budget, and reading its answer honestly
(spec/proofs.md).

A claim is *proved* only when Z3 answers ``unsat`` for its negation. ``sat`` means *refuted*: Z3
built a counterexample. Anything else (an exhausted budget, an incomplete theory) is *not
proved*, and never counts as success. Every question carries a budget in Z3's resource units
(``rlimit``, :mod:`.budgets`), not seconds, so the verdict does not depend on the machine's load;
the seconds are measured and reported beside it, never used to decide it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import z3

# Z3 catches SIGINT itself during a check (its ``ctrl_c`` option) and answers ``unknown``: the
# Ctrl-C would never reach kvsched, whose run would go on to a "not proved", or to a pass. With it
# off, the interpreter's handler hears the signal and kvsched's watchdog interrupts the check
# (kvsched.cli). Every module that makes a solver imports this one, so it holds for them all.
z3.set_param("ctrl_c", False)

PROVED = "proved"
REFUTED = "refuted"
NOT_PROVED = "not proved"
EXHAUSTED = "resource budget exhausted"
"""The reason of a NOT_PROVED answer whose check ran out of its rlimit."""


@dataclass(frozen=True)
class Answer:
    """Z3's verdict on one claim; ``model`` is the counterexample when the claim was refuted."""

    verdict: str
    seconds: float
    reason: str = ""
    """Why Z3 gave up (:data:`EXHAUSTED`, "incomplete", ...) when the verdict is NOT_PROVED."""
    model: Any = None
    units: int = 0
    """Z3 resource units (its rlimit count) the checks consumed: what the budget is spent in."""


@dataclass(frozen=True)
class Checked:
    """One ``solver.check()``: its result, and what it cost in seconds and resource units."""

    result: Any
    seconds: float
    units: int

    def reason(self, solver: Any) -> str:
        """Why an ``unknown`` came back, in words."""
        reason = solver.reason_unknown() or "unknown"
        # Z3 reports an exhausted rlimit as "canceled"; nothing else cancels a check here.
        return EXHAUSTED if "cancel" in reason else reason


def prove(hypotheses: Iterable[Any], claim: Any, rlimit: int) -> Answer:
    """Is ``claim`` true in every model of ``hypotheses``? Asks Z3 for a model of the negation."""
    solver = new_solver(rlimit)
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


def new_solver(rlimit: int) -> Any:
    solver = z3.Solver()
    limit(solver, rlimit)
    return solver


def limit(solver: Any, rlimit: int) -> None:
    """Give each later check of ``solver`` ``rlimit`` resource units."""
    # Z3 reads an rlimit of 0 as "no limit", never what a caller that ran out of budget wants.
    solver.set("rlimit", max(1, int(rlimit)))


def check(solver: Any, *assumptions: Any) -> Checked:
    """``solver.check()``, timed and counted."""
    before = units(solver)
    started = time.perf_counter()
    result = solver.check(*assumptions)
    seconds = time.perf_counter() - started
    return Checked(result, seconds, units(solver) - before)


def units(solver: Any) -> int:
    """Z3's resource counter, which runs for the whole context (every solver), not per solver:
    so only differences around one check mean anything."""
    try:
        return int(solver.statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:  # no counter before the solver's first use
        return 0


def _ask(solver: Any, on_sat: str, on_unsat: str) -> Answer:
    done = check(solver)
    if done.result == z3.unsat:
        return Answer(on_unsat, done.seconds, units=done.units)
    if done.result == z3.sat:
        return Answer(on_sat, done.seconds, model=solver.model(), units=done.units)
    return Answer(NOT_PROVED, done.seconds, reason=done.reason(solver), units=done.units)
