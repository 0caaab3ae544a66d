"""The engine model's proof set as lines of ``kvsched prove --engine`` (spec/proofs.md, 8).

Three kinds of claim: the safety layer by induction (every iteration, every workload of ``n``
requests, per batching, admitting after a preemption or not); LIVE-3, any watermark, for
``mixed`` batching (either design) and for ``prefill-first`` batching that admits nobody in a
``schedule()`` that preempted (the reference's default), by induction (every iteration) and,
independently of the induction's strengthening facts, by bounded model checking (no thrash
within the bounds); and the thrash of ``prefill-first`` batching with
``admit_after_preemption``, at each watermark of the plan, which must be *refuted* by a
workload that the reference scheduler, replayed through the runtime monitor, confirms: the
monitor reports LIVE-3 in the iteration the model does, and the model and the reference
schedule the run identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kvsched.checks import progress
from kvsched.checks.proofs.budgets import DEFAULT, Budgets
from kvsched.checks.proofs.catalogue import ProofResult
from kvsched.checks.proofs.engine.claims import LIVE3_STATEMENT, SAFETY_STATEMENTS, no_thrash
from kvsched.checks.proofs.engine.induction import InductionAnswer, prove_safety
from kvsched.checks.proofs.engine.liveness import prove_no_thrash
from kvsched.checks.proofs.engine.trajectories import confirm
from kvsched.checks.proofs.engine.unroll import EngineBounds, design_words, search
from kvsched.checks.proofs.query import NOT_PROVED, PROVED, REFUTED
from kvsched.spec.vocabulary import Batching

BATCHINGS: tuple[Batching, ...] = ("mixed", "prefill-first")
CONFIRM_ITERATIONS = 200
"""How long the reference runs a thrash witness to show it never drains."""

ENGINE_METHODS = {
    "induction": "every iteration of every workload of that many requests: arrivals, lengths, "
    "batch limit, pool, token budget and watermark symbolic and unbounded (admit_after_preemption "
    "too, where a claim says 'or not'); one page size a query",
    "BMC": "every workload within the bounds, unrolled from the initial state to the horizon",
}

ENGINE_NOT_COVERED = {
    "PAGE-2": "the model counts pages, it has no page ids (the monitor checks ownership)",
    "PAGE-6": "the model has no prefix cache, so no shared pages or reference counts",
    "BATCH-2..5": "conformance is the monitor's; the model's order is fcfs by construction",
    "LIVE-1, LIVE-2": "not modelled: no drain bound is claimed (prefill-first admitting after a "
    "preemption livelocks)",
    "PROTO-1": "a property of a scheduler's answers, not of the transition system",
}


@dataclass(frozen=True)
class EnginePlan:
    requests: int = 2
    """Requests in the induction proofs (every length and limit symbolic)."""
    page_sizes: tuple[int, ...] = (1, 2, 3)
    bounds: EngineBounds = field(default_factory=lambda: EngineBounds(horizon=4))
    """Workloads for the LIVE-3 searches. Within these bounds the shortest thrash is in
    iteration 4 (spec/proofs.md, 8.5); each iteration more costs several times the time."""
    budgets: Budgets = DEFAULT
    """Z3 resource units: ``engine_induction`` per check, ``engine_search`` per search."""
    thrash_watermarks: tuple[int, ...] = (0, 2)
    """Watermarks at which prefill-first batching admitting after a preemption must be shown to
    thrash."""


NO_THRASH_DESIGNS: dict[Batching, bool | None] = {"mixed": None, "prefill-first": False}
"""The ``admit_after_preemption`` each batching is proved not to thrash with (``None``: either)."""


def run_engine_proofs(plan: EnginePlan) -> tuple[ProofResult, ...]:
    progress.phase("the engine designs: safety by induction")
    results = [safety(b, plan) for b in BATCHINGS]
    progress.phase("the engine designs: no thrashing")
    results += [never_thrashes(b, plan) for b in BATCHINGS]
    progress.phase("the engine designs: thrashing searched, bounded")
    for batching, admits in NO_THRASH_DESIGNS.items():
        bounds = replace(plan.bounds, page_sizes=plan.page_sizes, admit_after_preemption=admits)
        results.append(thrash(batching, bounds, plan))
    for watermark in plan.thrash_watermarks:
        pinned = replace(
            plan.bounds,
            page_sizes=plan.page_sizes,
            watermark=watermark,
            admit_after_preemption=True,
        )
        results.append(thrash("prefill-first", pinned, plan))
    return tuple(results)


def safety(batching: Batching, plan: EnginePlan) -> ProofResult:
    rlimit = plan.budgets.engine_induction
    seconds, units, open_ = _each_page_size(
        plan, lambda size: prove_safety(batching, plan.requests, size, rlimit, None)
    )
    ids = tuple(dict.fromkeys(i for ids, _ in SAFETY_STATEMENTS.values() for i in ids))
    return ProofResult(
        claim="safety layer: " + ", ".join(SAFETY_STATEMENTS) + f" ({design_words(None, None)})",
        invariants=ids,
        policy=f"engine {batching}",
        method="induction",
        scope=f"{plan.requests} requests, page sizes {_sizes(plan.page_sizes)}",
        verdict=NOT_PROVED if open_ else PROVED,
        seconds=seconds,
        units=units,
        detail="; ".join(open_),
        statement="; ".join(f"{name}: {text}" for name, (_, text) in SAFETY_STATEMENTS.items()),
    )


def never_thrashes(batching: Batching, plan: EnginePlan) -> ProofResult:
    """LIVE-3 by induction for a design of :data:`NO_THRASH_DESIGNS`: the monitor's thrash rule
    is sound there."""
    admits = NO_THRASH_DESIGNS[batching]
    rlimit = plan.budgets.engine_induction
    seconds, units, open_ = _each_page_size(
        plan, lambda size: prove_no_thrash(batching, plan.requests, size, rlimit, admits)
    )
    design = design_words(None, admits)
    return ProofResult(
        claim=f"no thrash ({batching}, {design})",
        invariants=("LIVE-3",),
        policy=f"engine {batching}",
        method="induction",
        scope=f"{plan.requests} requests, page sizes {_sizes(plan.page_sizes)}",
        verdict=NOT_PROVED if open_ else PROVED,
        seconds=seconds,
        units=units,
        detail="; ".join(open_),
        statement=f"{LIVE3_STATEMENT}: the monitor's LIVE-3 never fires on {batching} batching, "
        f"{design}",
    )


def thrash(batching: Batching, bounds: EngineBounds, plan: EnginePlan) -> ProofResult:
    """LIVE-3 within ``bounds``: proved for the designs of :data:`NO_THRASH_DESIGNS`; for
    prefill-first admitting after a preemption, whatever the watermark, the claim must be
    refuted by a workload the reference and the monitor confirm."""
    started = time.perf_counter()
    rlimit = plan.budgets.engine_search
    answer = search(batching, bounds, lambda s, b, it, a: [no_thrash(it)], rlimit)
    admits = bounds.admit_after_preemption
    expected = REFUTED if batching == "prefill-first" and admits is not False else PROVED
    verdict, detail, witness = answer.verdict, answer.reason, None
    if verdict == PROVED and expected == REFUTED:
        detail = "no thrash within these bounds: thrash takes two preemptions, raise the horizon"
    if answer.found is not None:
        found = answer.found
        witness = found.workload
        seen = confirm(found.workload, found.config, CONFIRM_ITERATIONS, found.iteration)
        real = seen.invariant == "LIVE-3" and seen.iteration == found.iteration
        verdict = REFUTED if real and seen.same_schedule else NOT_PROVED
        detail = (
            f"token budget {found.config.token_budget}, watermark "
            f"{found.config.watermark_pages}, admit_after_preemption="
            f"{found.config.admit_after_preemption}: the model thrashes in iteration "
            f"{found.iteration}; replayed on the reference, the monitor reports "
            f"{seen.invariant or 'nothing'} in iteration {seen.iteration}, schedules "
            f"{'identical' if seen.same_schedule else 'DIFFERENT'}, "
            f"{'drained' if seen.drained else 'not drained'} after {CONFIRM_ITERATIONS} "
            "iterations" + ("" if verdict == REFUTED else "; NOT confirmed")
        )
    return ProofResult(
        claim=f"no thrash ({batching}, {design_words(bounds.watermark, admits)})",
        invariants=("LIVE-3",),
        policy=f"engine {batching}",
        method="BMC",
        scope=f"{bounds.requests} requests, <= {bounds.horizon} iterations",
        verdict=verdict,
        seconds=time.perf_counter() - started,
        units=answer.units,
        expected=expected,
        detail=detail,
        statement=f"{LIVE3_STATEMENT}, for every workload of {bounds.words()}",
        counterexample=witness,
    )


def _each_page_size(
    plan: EnginePlan, prove: Callable[[int], InductionAnswer]
) -> tuple[float, int, list[str]]:
    """An induction at each of the plan's page sizes: the seconds and Z3 resource units spent,
    and what stayed open."""
    seconds, units, open_ = 0.0, 0, []
    for page_size in plan.page_sizes:
        answer = prove(page_size)
        seconds, units = seconds + answer.seconds, units + answer.units
        if answer.verdict != PROVED:
            open_.append(f"page size {page_size}: {', '.join(answer.failed)} ({answer.reason})")
    return seconds, units, open_


def _sizes(sizes: tuple[int, ...]) -> str:
    return "/".join(map(str, sizes))
