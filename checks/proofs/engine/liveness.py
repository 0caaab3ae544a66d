"""LIVE-3 of the engine model by induction: the monitor's thrash rule never fires on mixed
batching, in any iteration (spec/proofs.md, section 8.3).

Why it holds, as the facts below state it: in ``mixed`` batching (vLLM v1) admission happens only
with budget left after every running request computed, so each of them computed all it lacked
and sampled a token; a request readmitted next to a running one therefore comes back with
progress made since its preemption. Readmitted into an empty batch, it is the first of the batch,
and the first is never preempted: every page is its for the taking once the others are gone, and
its peak fits the pool. So a preempted request is always preempted again only after progress.
The watermark plays no part. ``prefill-first`` batching breaks the first step (a continuing
chunk is readmitted at once, without a decode), and the same proof fails there, as the
thrash witness of :mod:`.results` shows it must.
"""

from __future__ import annotations

from typing import Any

import z3

from kvsched.checks.proofs.engine.claims import LIVE3_STATEMENT
from kvsched.checks.proofs.engine.induction import InductionAnswer, prove_inductive, state_facts
from kvsched.checks.proofs.engine.step import EngineIteration
from kvsched.checks.proofs.engine.system import NEVER, RUNNING, EngineState, EngineSystem
from kvsched.spec.vocabulary import Batching

STATEMENT = LIVE3_STATEMENT


def progress_facts(s: EngineSystem, st: EngineState) -> list[Any]:
    """The safety invariant, and the monitor's LIVE-3 bookkeeping as it stands between
    iterations."""
    facts = [*state_facts(s, st), st.progress >= 0]
    for i in range(s.size):
        stamp, most, kv = st.stamp[i], st.most[i], st.computed[i]
        facts += [stamp >= NEVER, stamp <= st.progress, most >= kv, kv >= 0]
        # Nothing computed ever reached past the token being sampled.
        facts.append(most < s.tokens(i, st.generated[i]))
        # A request preempted with no progress since runs first, where it cannot be preempted.
        stale = z3.And(st.phase[i] == RUNNING, stamp != NEVER, stamp == st.progress)
        facts.append(z3.Implies(stale, st.running.items[0] == i))
    return facts


def prove_no_thrash(
    batching: Batching, requests: int, page_size: int, timeout_s: float
) -> InductionAnswer:
    def claims(s: EngineSystem, b: EngineState, it: EngineIteration, a: EngineState) -> Any:
        return {"no-thrash": z3.Not(it.thrash)}

    return prove_inductive(batching, requests, page_size, timeout_s, progress_facts, claims)
