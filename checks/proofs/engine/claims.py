"""The safety layer and LIVE-3 as Z3 facts about one iteration of the engine model.

Each :class:`Claim` names the catalogue invariants it states (spec/semantics.md, section 8) and
is a term over the workload, the state before, the iteration and the state after. Pages are
counted, not named, so page ownership is stated as conservation (pages held plus free pages are
the pool at every point of the iteration) and no page id is in sight: PAGE-2 proper stays the
monitor's (spec/proofs.md, section 8.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.engine.step import EngineIteration
from kvsched.checks.proofs.engine.system import (
    ABSENT,
    FINISHED,
    RUNNING,
    WAITING,
    EngineState,
    EngineSystem,
)


@dataclass(frozen=True)
class Claim:
    name: str
    ids: tuple[str, ...]
    statement: str
    term: Any


SAFETY_STATEMENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "pool-conservation": (
        ("PAGE-3",),
        "free pages + pages held = pool, once schedule() returns and after the iteration",
    ),
    "within-pool": (
        ("PAGE-5",),
        "no chunk takes more pages than are free; free pages never negative",
    ),
    "only-running-hold": (
        ("PAGE-4",),
        "a request not in the batch holds no page (waiting, preempted or finished)",
    ),
    "kv-within-pages": (
        ("PAGE-1", "DEC-3"),
        "every request in the batch holds exactly ceil(computed / page size) pages: no KV "
        "beyond the pages held, none wasted",
    ),
    "token-from-compute": (
        ("DEC-1", "DEC-2", "DEC-3"),
        "a token only for a request in the batch that computed this iteration and whose computed "
        "tokens then reach its prompt and output so far; one at most",
    ),
    "exact-length": (
        ("REQ-2",),
        "tokens never exceed the output length; finished exactly when they reach it; a finished "
        "request never runs or finishes again",
    ),
    "admission-after-arrival": (("REQ-1",), "a request admitted in iteration n arrived before n"),
    "batch-and-budget": (
        ("BATCH-1",),
        "the batch within the batch limit, the tokens computed within the token budget",
    ),
    "lists-match-phases": (
        (),
        "the batch list holds exactly the running requests and the queue the waiting ones",
    ),
}
LIVE3_STATEMENT = (
    "no request is preempted twice with no token and no new KV between, the second's iteration "
    "included (thrash)"
)


def safety_claims(
    s: EngineSystem, before: EngineState, it: EngineIteration, after: EngineState
) -> list[Claim]:
    n, size, ps = it.number, range(s.size), s.page_size
    pool = s.pool_pages
    in_batch = [it.running.contains(i) for i in size]
    terms: dict[str, Any] = {
        "pool-conservation": z3.And(
            it.free + z3.Sum(list(it.held)) == pool, after.free + z3.Sum(list(after.held)) == pool
        ),
        "within-pool": z3.And(z3.Not(it.overdrawn), it.free >= 0, after.free >= 0),
        "only-running-hold": z3.And(
            *[z3.Implies(z3.Not(in_batch[i]), it.held[i] == 0) for i in size],
            *[z3.Implies(after.phase[i] != RUNNING, after.held[i] == 0) for i in size],
        ),
        "kv-within-pages": z3.And(
            *[z3.Implies(in_batch[i], it.held[i] == s.pages(it.kv[i])) for i in size],
            *[z3.Implies(in_batch[i], it.kv[i] <= it.held[i] * ps) for i in size],
        ),
        "token-from-compute": z3.And(
            *[
                z3.Implies(
                    it.decoded[i],
                    z3.And(
                        in_batch[i],
                        it.computed[i] > 0,
                        it.kv[i] == s.tokens(i, before.generated[i]),
                        after.generated[i] == before.generated[i] + 1,
                    ),
                )
                for i in size
            ],
            *[after.generated[i] - before.generated[i] <= 1 for i in size],
        ),
        "exact-length": z3.And(
            *[after.generated[i] <= s.output[i] for i in size],
            *[(after.phase[i] == FINISHED) == (after.generated[i] == s.output[i]) for i in size],
            *[z3.Implies(before.phase[i] == FINISHED, z3.Not(in_batch[i])) for i in size],
            *[z3.Implies(it.finished[i], before.phase[i] != FINISHED) for i in size],
        ),
        "admission-after-arrival": z3.And(
            *[z3.Implies(it.admitted.contains(i), s.arrival[i] < n) for i in size]
        ),
        "batch-and-budget": z3.And(
            it.running.length <= s.batch_limit, z3.Sum(list(it.computed)) <= s.token_budget
        ),
        "lists-match-phases": z3.And(
            *[after.running.contains(i) == (after.phase[i] == RUNNING) for i in size],
            *[after.waiting.contains(i) == (after.phase[i] == WAITING) for i in size],
            *[z3.Implies(after.phase[i] == ABSENT, s.arrival[i] >= n) for i in size],
        ),
    }
    return [Claim(name, *SAFETY_STATEMENTS[name], term) for name, term in terms.items()]


def no_thrash(it: EngineIteration) -> Claim:
    return Claim("no-thrash", ("LIVE-3",), LIVE3_STATEMENT, z3.Not(it.thrash))
