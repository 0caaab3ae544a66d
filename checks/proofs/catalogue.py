"""The proof set: every Z3 obligation kvsched claims, run under resource budgets, as results.

:func:`run_proofs` runs, in order: the page-accounting lemmas (all integers), the inductive
safety proofs of the static and continuous transition systems (``requests`` requests, all
iterations), bounded model checking of LIVE-1 for small workloads, and, on request, the
deliberately broken schedulers that bounded model checking must refute. spec/proofs.md states
what each obligation says; ``kvsched prove`` prints the results.

Verdicts (:mod:`.query`): *proved* only on ``unsat``; *refuted* only with a counterexample
workload reached from the initial state and confirmed by replaying it; anything else, including
an exhausted resource budget and an induction step that fails (its counterexample may be
unreachable), is *not proved*.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from kvsched.checks import progress
from kvsched.checks.proofs.bmc import Bounds, check_drains, find_violation
from kvsched.checks.proofs.budgets import DEFAULT, Budgets
from kvsched.checks.proofs.compare import DOMINANCE, prove_never_later
from kvsched.checks.proofs.induction import LEMMAS as STEP_LEMMAS
from kvsched.checks.proofs.induction import Obligation, prove_inductive
from kvsched.checks.proofs.invariant import STATE_FACTS
from kvsched.checks.proofs.model import BROKEN, Rules
from kvsched.checks.proofs.page_lemmas import LEMMAS, prove_lemma
from kvsched.checks.proofs.query import NOT_PROVED, PROVED, REFUTED, Answer
from kvsched.checks.proofs.steps import LIVE_CONCLUSION, STEP_FACTS
from kvsched.spec.vocabulary import POLICY_NAMES
from kvsched.spec.workload import Workload


@dataclass(frozen=True)
class ProofResult:
    """One line of the proof report."""

    claim: str
    """Short name: the lemma, or the model facts that state the invariant."""
    invariants: tuple[str, ...]
    policy: str
    method: str
    """"lemma", "induction" or "BMC" (bounded model checking); see spec/proofs.md."""
    scope: str
    """For which sizes the claim was decided, in a few words; :data:`METHODS` says the rest."""
    verdict: str
    seconds: float
    """Wall time over the claim's queries: reported, never a budget (it varies with the load)."""
    expected: str = PROVED
    """REFUTED for a deliberately broken scheduler: the check must find its bug."""
    detail: str = ""
    statement: str = ""
    """The claim in words."""
    counterexample: Workload | None = None
    units: int = 0
    """Z3 resource units over the claim's queries, the currency of its budget (:mod:`.budgets`)."""

    @property
    def as_expected(self) -> bool:
        return self.verdict == self.expected


METHODS = {
    "lemma": "for all integers and every page size >= 1",
    "induction": "for any number of iterations; arrivals, lengths, batch limit, pool and page "
    "size all symbolic",
    "BMC": "every workload within the bounds (any page size and limits), unrolled to its "
    "iteration bound",
}


NOT_COVERED = {
    "PAGE-2": "the model counts pages, it has no page ids (monitor and Hypothesis check it)",
    "DEC-3": "the model has no prefill chunks: the admission iteration is the first decode",
    "PROTO-1": "a property of a scheduler's answers, not of the transition system",
    "BATCH-6": "the model schedules no running loop: every active request decodes in each step",
    "PAGE-6": "the model has no prefix cache (the monitor checks hits against the workload)",
    "BATCH-5": "the model has no prefill chunks",
    "LIVE-2": "not modelled: the model's policies admit whenever the head fits (LIVE-1 is proved)",
    "LIVE-3": "not modelled: the model's policies never preempt",
    "LIVE-4": "not modelled: the model's policies never preempt",
    "LIVE-5": "not modelled: the model's workloads fit the pool",
    "PAGE-7": "not modelled: the model processes each step's output before the next is scheduled",
    "SLOT-1": "not modelled: the model has no state slots beside the pages",
    "SLOT-2": "not modelled: the model has no state slots beside the pages",
}
"""Catalogue invariants these proofs do not speak about, and why (spec/proofs.md, section 3)."""


@dataclass(frozen=True)
class ProofPlan:
    requests: int = 12
    """Requests in the inductive proofs (the arrivals, lengths and limits are symbolic)."""
    budgets: Budgets = DEFAULT
    """Z3 resource units per query (per search for bounded model checking)."""
    policies: tuple[str, ...] = POLICY_NAMES
    bounds: Bounds = field(default_factory=Bounds)
    """Workload sizes for bounded model checking."""
    broken: bool = False
    """Also show that bounded model checking refutes the broken schedulers of z3_model.BROKEN."""


def run_proofs(plan: ProofPlan) -> tuple[ProofResult, ...]:
    budgets = plan.budgets
    progress.phase("page lemmas, for all integers")
    results = list(page_lemmas(budgets.lemma))
    premises: list[Obligation] = []
    for policy in plan.policies:
        progress.phase(f"{policy}: induction over {plan.requests} symbolic requests")
        obligations = prove_inductive(Rules(policy), plan.requests, budgets.induction)
        premises += obligations
        results += induction(policy, plan.requests, obligations)
    if set(plan.policies) == set(POLICY_NAMES):
        progress.phase("continuous never finishes a request later than static")
        results.append(never_later(plan.requests, budgets.induction, premises))
    for policy in plan.policies:
        progress.phase(f"{policy}: bounded liveness ({plan.bounds.requests} requests)")
        results.append(bounded_liveness(policy, plan.bounds, budgets.bmc))
    if plan.broken:
        progress.phase("the broken models, each refuted")
        results += [broken(name, plan.bounds, budgets.bmc) for name in BROKEN]
    return tuple(results)


def page_lemmas(rlimit: int) -> list[ProofResult]:
    results = []
    for lemma in LEMMAS:
        answer = prove_lemma(lemma, rlimit)
        results.append(
            ProofResult(
                claim=f"page lemma {lemma.name}",
                invariants=lemma.ids,
                policy="any",
                method="lemma",
                scope="all integers",
                verdict=answer.verdict,
                seconds=answer.seconds,
                detail=_why(answer),
                statement=lemma.statement,
                units=answer.units,
            )
        )
    return results


def induction(policy: str, requests: int, obligations: list[Obligation]) -> list[ProofResult]:
    """One result per catalogue invariant, plus one for the strengthening facts and lemmas."""
    # Every consecution assumed the whole invariant and the lemmas, so an invariant is proved
    # only if all of those are: the invariant as a whole must be inductive.
    foundation = [
        o for o in obligations if o.kind in ("initiation", "consecution", "lemma", "vacuity")
    ]
    failed = [o for o in foundation if o.answer.verdict != PROVED]
    scope = f"{requests} requests"
    statements = {f.name: f.statement for f in STATE_FACTS}
    statements |= {f.name: f.statement for f in (*STEP_FACTS, *STEP_LEMMAS)}
    statements["drains-by-bound"] = LIVE_CONCLUSION
    statements["hypotheses-satisfiable"] = "the hypotheses have a model mid-run (not vacuous)"
    groups: dict[str, list[Obligation]] = {}
    for o in obligations:
        for key in o.ids or ("auxiliary",):
            groups.setdefault(key, []).append(o)
    results = []
    for key, own in groups.items():
        own_failed = [o for o in own if o.answer.verdict != PROVED]
        blocking = own_failed or failed
        results.append(
            ProofResult(
                claim=_claim(key, own),
                invariants=(key,) if key != "auxiliary" else (),
                policy=policy,
                method="induction",
                scope=scope,
                verdict=NOT_PROVED if blocking else PROVED,
                seconds=sum(o.answer.seconds for o in own),
                units=sum(o.answer.units for o in own),
                detail=_blocked(blocking) if own_failed else _rests_on(failed),
                statement="; ".join(
                    dict.fromkeys(f"{o.fact}: {statements.get(o.fact, '')}" for o in own)
                ),
            )
        )
    return results


def never_later(requests: int, rlimit: int, premises: list[Obligation]) -> ProofResult:
    """Continuous batching admits every request no later than static batching (z3_compare)."""
    obligations = prove_never_later(requests, rlimit, premises)
    failed = [o for o in obligations if o.answer.verdict != PROVED]
    own = [o.answer for o in obligations if o.fact == "dominance"]
    return ProofResult(
        claim="continuous never admits later than static",
        invariants=(),
        policy="both",
        method="induction",
        scope=f"{requests} requests",
        verdict=NOT_PROVED if failed else PROVED,
        seconds=sum(a.seconds for a in own),
        units=sum(a.units for a in own),
        detail=_blocked(failed),
        statement=DOMINANCE + "; so no request waits longer or finishes later under continuous "
        "batching: its P50/P95/max wait and iterations are never higher",
    )


def bounded_liveness(policy: str, bounds: Bounds, rlimit: int) -> ProofResult:
    started = time.perf_counter()
    answer = check_drains(Rules(policy), bounds, rlimit)
    verdict = answer.verdict
    return ProofResult(
        claim="drains by the iteration bound",
        invariants=("LIVE-1",),
        policy=policy,
        method="BMC",
        scope=_bounds(bounds),
        verdict=verdict,
        seconds=time.perf_counter() - started,
        units=answer.units,
        detail=_why(answer) if verdict != REFUTED else "a workload starves within the bounds",
        statement=f"every workload of {_bounds_words(bounds)} has drained by its iteration bound",
    )


def broken(name: str, bounds: Bounds, rlimit: int) -> ProofResult:
    """Bounded model checking must catch a deliberately broken scheduler with a real workload."""
    rules = BROKEN[name]
    started = time.perf_counter()
    answer, found = find_violation(rules, bounds, rlimit)
    seconds = time.perf_counter() - started
    method = "BMC"
    if found is None:
        verdict = answer.verdict  # PROVED: no violation within the bounds, the check missed it
        detail = _why(answer) or "no counterexample within the bounds"
        invariants: tuple[str, ...] = ()
    else:
        verdict = REFUTED if found.confirmed else NOT_PROVED
        invariants = (found.invariant,)
        detail = f"{found.invariant} ({found.fact}) broken in iteration {found.iteration}" + (
            "" if found.confirmed else "; NOT confirmed by replaying the workload"
        )
    return ProofResult(
        claim=f"broken on purpose: {name}",
        statement=f"bounded model checking finds a workload on which {name} breaks the catalogue",
        invariants=invariants,
        policy=rules.policy,
        method=method,
        scope=_bounds(bounds),
        verdict=verdict,
        seconds=seconds,
        units=answer.units,
        expected=REFUTED,
        detail=detail,
        counterexample=found.workload if found else None,
    )


def outcome(results: Iterable[ProofResult]) -> str:
    """REFUTED if a claim got the wrong definite answer, else NOT_PROVED if any is open, else
    PROVED: the summary ``kvsched prove`` turns into its exit code."""
    results = list(results)
    if any(r.verdict != NOT_PROVED and not r.as_expected for r in results):
        return REFUTED
    if any(r.verdict == NOT_PROVED for r in results):
        return NOT_PROVED
    return PROVED


def _claim(key: str, own: list[Obligation]) -> str:
    facts = list(dict.fromkeys(o.fact for o in own))
    if key == "auxiliary":
        return f"strengthening: {len(facts)} facts and lemmas"
    return ", ".join(facts)


def _blocked(failed: list[Obligation]) -> str:
    if not failed:
        return ""
    o = failed[0]
    if o.answer.verdict == REFUTED:
        why = "hypotheses contradict" if o.kind == "vacuity" else "counterexample to induction"
    else:
        why = o.answer.reason
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{o.kind} of '{o.fact}' not proved: {why}{more}"


def _rests_on(failed: list[Obligation]) -> str:
    return f"its own obligations are proved, but it rests on: {_blocked(failed)}" if failed else ""


def _why(answer: Answer) -> str:
    return answer.reason if answer.verdict == NOT_PROVED else ""


def _bounds(b: Bounds) -> str:
    return f"{b.requests} requests, <= {b.steps} iterations"


def _bounds_words(b: Bounds) -> str:
    return (
        f"{b.requests} requests with arrivals <= {b.max_arrival}, outputs <= {b.max_output} and "
        f"prompts <= {b.max_prompt} tokens, any page size and limits"
    )
