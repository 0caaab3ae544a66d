"""Which invariants of the catalogue (:mod:`.invariants`) constrain a target: those of its policy,
the conformance rules it declares, less those its declarations take out."""

from __future__ import annotations

from .invariants import CATALOGUE, Invariant
from .properties import TargetProperties
from .text import plural

__all__ = ["applicable", "declared_out"]


def applicable(policy: str, properties: TargetProperties | None = None) -> tuple[Invariant, ...]:
    """The invariants that constrain a scheduler declaring ``policy`` and ``properties``.

    Conformance rules apply where declared: BATCH-4 under the declared admission order (the
    policy's fcfs for static and continuous unless another is declared, none otherwise), BATCH-5
    where a chunking mode is declared, BATCH-6 where ``serves_running`` is; so do the safety
    rules PAGE-7, where ``async_scheduling`` is, and SLOT-1 and SLOT-2, where ``state_slots``
    is. The rules a declaration takes out
    (:func:`declared_out`) do not apply.
    """
    ids = {i.id for i in CATALOGUE if "any" in i.applies_to or policy in i.applies_to}
    if properties is not None:
        order = properties.order
        if order is None:
            order = "fcfs" if policy in ("static", "continuous") else "none"
        ids.discard("BATCH-4")
        if order != "none":
            ids.add("BATCH-4")
        if properties.chunking is not None:
            ids.add("BATCH-5")
        if properties.serves_running:
            ids.add("BATCH-6")
        if properties.async_scheduling:
            ids.add("PAGE-7")
        if properties.state_slots is not None:
            ids.update(("SLOT-1", "SLOT-2"))
        ids.difference_update(declared_out(properties))
    return tuple(i for i in CATALOGUE if i.id in ids)


def declared_out(properties: TargetProperties) -> dict[str, str]:
    """The invariants ``properties`` take out, each with why, as a verdict says it.

    LIVE-3 (thrash), where a prefill chunk below the token budget is declared (vLLM's
    long_prefill_token_threshold): a request recomputing below the most KV it held may then stop
    short of it with budget left for others. LIVE-3's soundness (spec/proofs.md 8.3) rests on
    such a request being the last of the batch; with the cap the engine admits behind it, so
    iterations without progress between two preemptions can be recompute on its way to the
    mark, not a cycle (vLLM 0.33 does this on a run that drains). LIVE-1's bound still ends a
    run that cycles forever."""
    chunk, budget = properties.prefill_chunk, properties.token_budget
    if chunk is None or (budget is not None and chunk >= budget):
        return {}
    return {
        "LIVE-3": f"the declared prefill chunk ({plural(chunk, 'token')}) is below the token "
        "budget: the engine may admit behind a request still recomputing, so no progress "
        "between two preemptions is not a cycle; LIVE-1 still bounds the run"
    }
