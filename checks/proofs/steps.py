"""The step facts of the reference transition systems: properties of one iteration, such as
DEC-1's one token per request (spec/proofs.md, section 2), and the catalogue checks that
:mod:`.bmc` and :mod:`.replay` ask of each iteration. The state facts are in :mod:`.invariant`.
"""

from __future__ import annotations

from typing import Any

import z3

from kvsched.checks.proofs.invariant import BOTH, STATE_FACTS, StepFact, count_true, each
from kvsched.checks.proofs.model import ACTIVE, FINISHED, Iteration, State
from kvsched.checks.proofs.workload import SymbolicWorkload


def _no_idle_slot(s: State, it: Iteration, w: SymbolicWorkload, i: int) -> Any:
    # i heads what is left of the queue: queued, not admitted, everyone ahead of it admitted.
    heads = z3.And(
        it.eligible[i],
        z3.Not(it.admitted[i]),
        *[z3.Implies(it.eligible[j], it.admitted[j]) for j in range(i)],
    )
    full = z3.Or(
        count_true(list(it.running)) >= w.batch_limit,
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
