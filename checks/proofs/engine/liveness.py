"""LIVE-3 of the engine model by induction: the monitor's thrash rule never fires, in any
iteration, on mixed batching and on prefill-first batching that admits nobody after a
preemption (spec/proofs.md, section 8.3).

Why it holds, as the facts below state it: every iteration that preempts also makes progress,
so a stamp taken at a preemption is below the progress once the iteration ends, and no request
is ever preempted again with nothing made since. A request recomputing below its high-water
mark is the last of the batch: a request is admitted behind it only with budget left after its
chunk, which then reached the end of its known tokens and passed the mark. So it is the first
victim, and every other request that computes computes new KV or a token. If none computes, the
batch's first request decodes (prefill-first's decode pass; mixed runs every request), and the
first is never preempted: once the others are gone every page is its, and its peak fits the
pool. The watermark plays no part. In prefill-first, admitting after a preemption breaks the
first step: the chunk that preempted itself is readmitted in the same ``schedule()``, which can
then compute nothing new and decode nothing, and the same proof fails there, as the thrash
witness of :mod:`.results` shows it must. Mixed admits only with budget left after every
running request computed, so there the proof holds with either design.
"""

from __future__ import annotations

from typing import Any

import z3

from kvsched.checks.proofs.engine.induction import InductionAnswer, prove_inductive, state_facts
from kvsched.checks.proofs.engine.step import EngineIteration
from kvsched.checks.proofs.engine.system import NEVER, RUNNING, EngineState, EngineSystem
from kvsched.spec.vocabulary import Batching


def progress_facts(s: EngineSystem, st: EngineState) -> list[Any]:
    """The safety invariant, and the monitor's LIVE-3 bookkeeping as it stands between
    iterations."""
    return [f for group in named_progress_facts(s, st).values() for f in group]


def named_progress_facts(s: EngineSystem, st: EngineState) -> dict[str, list[Any]]:
    """:func:`progress_facts` by name, so a test can drop one and see the proof fail."""
    facts: dict[str, list[Any]] = {
        "safety": [*state_facts(s, st), st.progress >= 0],
        "marks": [],
        "stamps-below-progress": [],
        "recomputing-is-last": [],
    }
    for i in range(s.size):
        stamp, most, kv = st.stamp[i], st.most[i], st.computed[i]
        # Nothing computed ever reached past the token being sampled.
        facts["marks"] += [most >= kv, kv >= 0, most < s.tokens(i, st.generated[i])]
        facts["stamps-below-progress"] += [
            stamp >= NEVER,
            z3.Implies(stamp != NEVER, stamp < st.progress),
        ]
        recomputing = z3.And(st.phase[i] == RUNNING, kv < most)
        facts["recomputing-is-last"].append(z3.Implies(recomputing, st.running.last() == i))
    return facts


def prove_no_thrash(
    batching: Batching,
    requests: int,
    page_size: int,
    rlimit: int,
    admit_after_preemption: bool | None = False,
) -> InductionAnswer:
    """``admit_after_preemption`` pinned, or either (``None``); ``rlimit`` units per check."""

    def claims(s: EngineSystem, b: EngineState, it: EngineIteration, a: EngineState) -> Any:
        return {"no-thrash": z3.Not(it.thrash)}

    return prove_inductive(
        batching, requests, page_size, rlimit, progress_facts, claims, admit_after_preemption
    )
