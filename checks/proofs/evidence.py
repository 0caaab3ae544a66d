"""Z3 evidence for the reference schedulers: which invariants are proved for every iteration.

The Z3 models (:mod:`.model`) describe the reference static and continuous transition systems
and are cross-checked against ``reference/``, so their inductive proofs (:mod:`.induction`)
speak about exactly those two classes and nothing else: a subclass, a learner's solution or a
third-party scheduler gets no Z3 line in its verdict. An invariant counts as proved only if every
obligation naming it, and every fact it rests on, came back "proved"; Z3's "unknown" (an
exhausted resource budget) is not a proof.
"""

from __future__ import annotations

from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.reference import ContinuousScheduler, StaticScheduler
from kvsched.spec.protocol import SchedulerFactory

MODELLED: dict[object, str] = {StaticScheduler: "static", ContinuousScheduler: "continuous"}


def modelled_policy(factory: SchedulerFactory) -> str:
    """The policy whose Z3 model is ``factory``, or "" when no model describes it."""
    return MODELLED.get(factory, "")


def proved_invariants(
    policy: str, requests: int, rlimit: int = DEFAULT.induction
) -> tuple[str, ...]:
    """Catalogue ids proved inductive for ``requests`` symbolic requests under ``policy``, each
    Z3 query within ``rlimit`` resource units (so the list does not shrink on a busy machine).

    An id counts only if its own obligations *and* everything they rest on (initiation, the
    strengthening facts, the lemmas, the vacuity check) were proved: :func:`.proofs.induction`
    decides that, here as in ``kvsched prove``.
    """
    from kvsched.checks.proofs.catalogue import (
        induction,  # z3 is imported only when proofs are asked for
    )
    from kvsched.checks.proofs.induction import prove_inductive
    from kvsched.checks.proofs.model import Rules
    from kvsched.checks.proofs.query import PROVED

    obligations = list(prove_inductive(Rules(policy), requests, rlimit))
    results = induction(policy, requests, obligations)
    return tuple(sorted({i for r in results if r.verdict == PROVED for i in r.invariants}))
