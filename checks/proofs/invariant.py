"""The invariant of the reference transition systems, fact by fact (spec/proofs.md, section 2).

:data:`STATE_FACTS` are properties of a state between iterations: the catalogue's invariants as
the count model states them (``ids`` names them) and the auxiliary facts that make their
conjunction inductive (``ids`` empty). The step facts, properties of one iteration, are in
:mod:`.steps`. :mod:`.induction` proves them all; :mod:`.bmc` searches the same facts for
counterexamples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.model import ACTIVE, FINISHED, WAITING, Iteration, State
from kvsched.checks.proofs.workload import SymbolicWorkload
from kvsched.spec.vocabulary import POLICY_NAMES

BOTH: tuple[str, ...] = POLICY_NAMES


@dataclass(frozen=True)
class StateFact:
    name: str
    ids: tuple[str, ...]
    """Catalogue invariants this fact states; empty for an auxiliary (strengthening) fact."""
    policies: tuple[str, ...]
    statement: str
    holds: Callable[[State, SymbolicWorkload], Any]


@dataclass(frozen=True)
class StepFact:
    name: str
    ids: tuple[str, ...]
    policies: tuple[str, ...]
    statement: str
    holds: Callable[[State, Iteration, State, SymbolicWorkload], Any]


def each(s: State, claim: Callable[[int], Any]) -> Any:
    return z3.And(*[claim(i) for i in range(s.size)])


def count_true(flags: list[Any]) -> Any:
    return z3.Sum([z3.If(f, 1, 0) for f in flags])


def _bounded_tokens(s: State, w: SymbolicWorkload, i: int) -> Any:
    p, g, out = s.phase[i], s.generated[i], w.output[i]
    return z3.And(
        z3.Implies(p == WAITING, g == 0),
        z3.Implies(p == ACTIVE, z3.And(g >= 1, g < out)),
        z3.Implies(p == FINISHED, g == out),
    )


def _timing(s: State, w: SymbolicWorkload, i: int) -> Any:
    return z3.And(
        z3.Implies(s.phase[i] == ACTIVE, s.generated[i] == s.t - s.start[i] + 1),
        z3.Implies(s.phase[i] == FINISHED, s.finish[i] == s.start[i] + w.output[i] - 1),
        z3.Implies(s.phase[i] == FINISHED, s.finish[i] <= s.t),
    )


def _fcfs(s: State, w: SymbolicWorkload, i: int) -> Any:
    return z3.And(
        *[
            z3.Implies(
                s.phase[i] != WAITING, z3.And(s.phase[j] != WAITING, s.start[j] <= s.start[i])
            )
            for j in range(i)  # requests are numbered in admission order
        ]
    )


def _one_batch(s: State, i: int) -> Any:
    return z3.And(
        *[
            z3.Implies(z3.And(s.phase[i] == ACTIVE, s.phase[j] == ACTIVE), s.start[i] == s.start[j])
            for j in range(i + 1, s.size)
        ]
    )


def all_finished(s: State) -> Any:
    return each(s, lambda i: s.phase[i] == FINISHED)


def _progress(s: State, w: SymbolicWorkload) -> Any:
    # Every iteration in which an arrived request is unfinished produces a token, and an
    # iteration producing none lies before the last arrival; so tokens + min(t, last) >= t.
    last = w.last_arrival()
    return z3.Or(all_finished(s), z3.Sum(list(s.generated)) + z3.If(s.t < last, s.t, last) >= s.t)


STATE_FACTS: tuple[StateFact, ...] = (
    StateFact(
        "phases",
        (),
        BOTH,
        "t >= 0 and every request is waiting, active or finished",
        lambda s, w: z3.And(s.t >= 0, each(s, lambda i: z3.And(s.phase[i] >= 0, s.phase[i] <= 2))),
    ),
    StateFact(
        "tokens",
        ("REQ-2",),
        BOTH,
        "waiting: 0 tokens; active: 1 .. output-1 tokens; finished: exactly output tokens",
        lambda s, w: each(s, lambda i: _bounded_tokens(s, w, i)),
    ),
    StateFact(
        "admission-after-arrival",
        ("REQ-1",),
        BOTH,
        "an admitted request was admitted in iteration start with arrival < start <= t",
        lambda s, w: each(
            s,
            lambda i: z3.Implies(
                s.phase[i] != WAITING, z3.And(w.arrival[i] < s.start[i], s.start[i] <= s.t)
            ),
        ),
    ),
    StateFact(
        "timing",
        (),
        BOTH,
        "active: generated = t - start + 1; finished: finish = start + output - 1 <= t",
        lambda s, w: each(s, lambda i: _timing(s, w, i)),
    ),
    StateFact(
        "fcfs-prefix",
        ("BATCH-4",),
        BOTH,
        "if i is admitted and j precedes i in admission order, j is admitted, no later than i",
        lambda s, w: each(s, lambda i: _fcfs(s, w, i)),
    ),
    StateFact(
        "batch-limit",
        ("BATCH-1",),
        BOTH,
        "active requests <= batch_limit",
        lambda s, w: count_true([p == ACTIVE for p in s.phase]) <= w.batch_limit,
    ),
    StateFact(
        "only-active-hold",
        ("PAGE-4",),
        BOTH,
        "a request that is not active holds 0 pages",
        lambda s, w: each(s, lambda i: z3.Implies(s.phase[i] != ACTIVE, s.held[i] == 0)),
    ),
    StateFact(
        "pages-minimal",
        ("PAGE-1",),
        BOTH,
        "an active request holds exactly pages(prompt + generated) pages",
        lambda s, w: each(
            s,
            lambda i: z3.Implies(
                s.phase[i] == ACTIVE, s.held[i] == w.pages(w.prompt[i] + s.generated[i])
            ),
        ),
    ),
    StateFact(
        "committed",
        (),
        BOTH,
        "committed = the sum of the active requests' peak pages",
        lambda s, w: (
            s.committed
            == z3.Sum([z3.If(s.phase[i] == ACTIVE, w.peak(i), 0) for i in range(s.size)])
        ),
    ),
    StateFact(
        "within-commitment",
        (),
        BOTH,
        "sum of pages held <= committed <= pool",
        lambda s, w: z3.And(z3.Sum(list(s.held)) <= s.committed, s.committed <= w.pool_pages),
    ),
    StateFact(
        "within-pool",
        ("PAGE-5",),
        BOTH,
        "0 <= sum of pages held <= pool",
        lambda s, w: z3.And(z3.Sum(list(s.held)) >= 0, z3.Sum(list(s.held)) <= w.pool_pages),
    ),
    StateFact(
        "conservation",
        ("PAGE-3",),
        BOTH,
        "free pages + pages held = pool",
        lambda s, w: s.free + z3.Sum(list(s.held)) == w.pool_pages,
    ),
    StateFact(
        "one-batch",
        ("BATCH-2",),
        ("static",),
        "all active requests were admitted in the same iteration",
        lambda s, w: each(s, lambda i: _one_batch(s, i)),
    ),
    StateFact(
        "progress",
        ("LIVE-1",),
        BOTH,
        "all finished, or tokens generated + min(t, last arrival) >= t",
        _progress,
    ),
)
