"""The invariant of the reference transition systems, fact by fact (spec/proofs.md, section 2).

:data:`STATE_FACTS` are properties of a state between iterations: the catalogue's invariants as
the count model states them (``ids`` names them) and the auxiliary facts that make their
conjunction inductive (``ids`` empty). :data:`STEP_FACTS` are properties of one iteration, such
as DEC-1's one token per request. :mod:`.induction` proves them all; :mod:`.bmc` searches
the same facts for counterexamples.
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


def _count(flags: list[Any]) -> Any:
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
        lambda s, w: _count([p == ACTIVE for p in s.phase]) <= w.batch_limit,
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


def _no_idle_slot(s: State, it: Iteration, w: SymbolicWorkload, i: int) -> Any:
    # i heads what is left of the queue: queued, not admitted, everyone ahead of it admitted.
    heads = z3.And(
        it.eligible[i],
        z3.Not(it.admitted[i]),
        *[z3.Implies(it.eligible[j], it.admitted[j]) for j in range(i)],
    )
    full = z3.Or(
        _count(list(it.running)) >= w.batch_limit,
        it.committed_during + w.peak(i) > w.pool_pages,
    )
    return z3.Implies(heads, full)


STEP_FACTS: tuple[StepFact, ...] = (
    StepFact(
        "one-token",
        ("DEC-1",),
        BOTH,
        "a request produces at most one token per iteration",
        lambda s, it, n, w: each(s, lambda i: n.generated[i] - s.generated[i] <= 1),
    ),
    StepFact(
        "tokens-only-active",
        ("DEC-2",),
        BOTH,
        "a request that produces a token is in the batch",
        lambda s, it, n, w: each(
            s, lambda i: z3.Implies(n.generated[i] > s.generated[i], it.running[i])
        ),
    ),
    StepFact(
        "no-early-admission",
        ("REQ-1",),
        BOTH,
        "a request admitted in iteration n arrived before n",
        lambda s, it, n, w: each(s, lambda i: z3.Implies(it.admitted[i], w.arrival[i] < it.number)),
    ),
    StepFact(
        "finish-once",
        ("REQ-2",),
        BOTH,
        "a finished request stays finished and is never admitted",
        lambda s, it, n, w: each(
            s,
            lambda i: z3.Implies(
                s.phase[i] == FINISHED, z3.And(n.phase[i] == FINISHED, z3.Not(it.admitted[i]))
            ),
        ),
    ),
    StepFact(
        "pool-never-overdrawn",
        ("PAGE-5",),
        BOTH,
        "the pages taken in an iteration never exceed the free pages before it",
        lambda s, it, n, w: (
            z3.Sum([it.pages_during[i] - s.held[i] for i in range(s.size)]) <= s.free
        ),
    ),
    StepFact(
        "one-page-growth",
        ("PAGE-1",),
        BOTH,
        "a request already active takes at most one new page per iteration",
        lambda s, it, n, w: each(
            s, lambda i: z3.Implies(s.phase[i] == ACTIVE, it.pages_during[i] - s.held[i] <= 1)
        ),
    ),
    StepFact(
        "no-mid-batch-admission",
        ("BATCH-2",),
        ("static",),
        "an iteration that admits starts with no active request",
        lambda s, it, n, w: z3.Implies(
            z3.Or(*it.admitted), z3.And(*[p != ACTIVE for p in s.phase])
        ),
    ),
    StepFact(
        "no-overtaking",
        ("BATCH-4",),
        BOTH,
        "once a queued request is not admitted, no request behind it is admitted",
        lambda s, it, n, w: z3.And(
            *[
                z3.Implies(z3.And(it.eligible[i], z3.Not(it.admitted[i])), z3.Not(it.admitted[j]))
                for i in range(s.size)
                for j in range(i + 1, s.size)
            ]
        ),
    ),
    StepFact(
        "no-idle-slot",
        ("BATCH-3",),
        ("continuous",),
        "after admission, the head of the queue does not fit: no free slot or not enough pages",
        lambda s, it, n, w: each(s, lambda i: _no_idle_slot(s, it, w, i)),
    ),
)


LIVE_CONCLUSION = "invariant and t >= last arrival + sum of outputs -> every request finished"


def catalogue_checks(
    policy: str, w: SymbolicWorkload, before: State, it: Iteration, after: State
) -> list[tuple[str, tuple[str, ...], Any]]:
    """(fact, catalogue ids, claim) for the catalogue facts of one iteration, step facts first.

    The auxiliary facts are left out, and so is ``progress``: a counterexample must break the
    catalogue, not a device of the proof.
    """
    checks = []
    for step in STEP_FACTS:
        if policy in step.policies and step.ids:
            checks.append((step.name, step.ids, step.holds(before, it, after, w)))
    for fact in STATE_FACTS:
        if policy in fact.policies and fact.ids and fact.name != "progress":
            checks.append((fact.name, fact.ids, fact.holds(after, w)))
    return checks


FACT_IDS = {f.name: f.ids for f in STATE_FACTS} | {f.name: f.ids for f in STEP_FACTS}
