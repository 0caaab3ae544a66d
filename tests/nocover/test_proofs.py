"""The inductive proofs, bounded model checking and `kvsched prove` (checks/proofs/).

Small sizes by default; the sizes spec/proofs.md claims run under @pytest.mark.slow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import z3

from kvsched.checks.proofs import catalogue as proofs
from kvsched.checks.proofs import induction as z3_induction
from kvsched.checks.proofs.bmc import Bounds, check_drains, find_violation, unroll
from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.catalogue import ProofPlan, ProofResult, outcome, run_proofs
from kvsched.checks.proofs.compare import dominates, prove_never_later
from kvsched.checks.proofs.induction import invariant, prove_inductive
from kvsched.checks.proofs.invariant import STATE_FACTS
from kvsched.checks.proofs.model import BROKEN, FINISHED, Rules, fresh_state, iteration, successor
from kvsched.checks.proofs.query import (
    EXHAUSTED,
    NOT_PROVED,
    PROVED,
    REFUTED,
    new_solver,
    prove,
    prove_with,
)
from kvsched.checks.proofs.steps import STEP_FACTS
from kvsched.checks.proofs.workload import abstract_pages, exact_pages, symbolic_workload
from kvsched.cli import main
from kvsched.reference import POLICIES, run
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.workload import parse_workload, workload_to_json

INDUCTION, BMC = DEFAULT.induction, DEFAULT.bmc


def unproved(rules: Rules, size: int) -> set[str]:
    return {o.fact for o in prove_inductive(rules, size, INDUCTION) if o.answer.verdict != PROVED}


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_reference_invariant_is_inductive(policy: str) -> None:
    obligations = prove_inductive(Rules(policy), 4, INDUCTION)
    assert {o.answer.verdict for o in obligations} == {PROVED}
    kinds = {o.kind for o in obligations}
    assert kinds == {"initiation", "consecution", "lemma", "step", "vacuity", "conclusion"}


@pytest.mark.parametrize(
    ("broken", "facts"),
    [
        ("static-admits-mid-batch", {"one-batch", "no-mid-batch-admission"}),
        ("admits-by-free-pages", {"within-pool", "pool-never-overdrawn"}),
        ("finished-keeps-pages", {"only-active-hold"}),
        ("admission-overtakes", {"fcfs-prefix", "no-overtaking"}),
    ],
)
def test_a_broken_scheduler_is_not_proved(broken: str, facts: set[str]) -> None:
    assert facts <= unproved(BROKEN[broken], 3)


@pytest.mark.parametrize(
    ("broken", "invariant_id"),
    [
        ("static-admits-mid-batch", "BATCH-2"),
        ("admits-by-free-pages", "PAGE-5"),
        ("finished-keeps-pages", "PAGE-4"),
        ("admission-overtakes", "BATCH-4"),
    ],
)
def test_bounded_model_checking_finds_a_real_counterexample(broken: str, invariant_id: str) -> None:
    answer, found = find_violation(BROKEN[broken], Bounds(3, 2, 3, 6), BMC)
    assert answer.verdict == REFUTED and found is not None
    assert found.confirmed and found.invariant == invariant_id
    parse_workload(workload_to_json(found.workload))  # a valid workload file
    # The same workload is fine for the reference scheduler of that policy.
    reference = run(found.workload, POLICIES[BROKEN[broken].policy])
    assert reference.drained and reference.fault is None


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_reference_is_not_refuted_by_bounded_model_checking(policy: str) -> None:
    answer, found = find_violation(Rules(policy), Bounds(2, 2, 2, 4), BMC)
    assert (answer.verdict, found) == (PROVED, None)


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_live_1_holds_up_to_the_bound_for_small_workloads(policy: str) -> None:
    assert check_drains(Rules(policy), Bounds(2, 2, 2, 4), BMC).verdict == PROVED


def test_the_iteration_bound_is_tight() -> None:
    # One iteration short of the bound, some workload has not drained: the bounded check of
    # LIVE-1 is not vacuous, and the bound of section 3.6 cannot be lowered.
    w = symbolic_workload(2, exact_pages(z3.Int("page_size")))
    bounds = Bounds(2, 2, 2, 4)
    u = unroll(w, Rules("continuous"), bounds.steps)
    bound = w.last_arrival() + z3.Sum(list(w.output))
    early = z3.And(
        *[
            z3.Implies(bound - 1 == k, z3.And(*[p == FINISHED for p in u.states[k].phase]))
            for k in range(bounds.steps + 1)
        ]
    )
    assert prove([*u.constraints, *bounds.constrain(w)], early, BMC).verdict == REFUTED


@pytest.mark.parametrize(
    ("dropped", "breaks"),
    [
        ("committed", {"within-pool", "pool-never-overdrawn", "progress"}),
        ("within-commitment", {"within-pool", "pool-never-overdrawn"}),
    ],
)
def test_the_strengthening_facts_are_needed(
    dropped: str, breaks: set[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # spec/proofs.md says the invariant is not inductive without them: check it stays true.
    kept = tuple(f for f in z3_induction.STATE_FACTS if f.name != dropped)
    monkeypatch.setattr(z3_induction, "STATE_FACTS", kept)
    assert breaks <= unproved(Rules("continuous"), 3)


def test_spec_proofs_md_writes_down_every_fact_of_the_proof() -> None:
    text = (Path(__file__).parents[2] / "spec" / "proofs.md").read_text()
    facts = [*STATE_FACTS, *STEP_FACTS, *z3_induction.LEMMAS]
    missing = [f.name for f in facts if f"| {f.name} |" not in text]
    assert not missing


def test_continuous_batching_never_admits_later_than_static() -> None:
    obligations = prove_never_later(4, INDUCTION)
    assert {o.answer.verdict for o in obligations} == {PROVED}


def test_the_converse_is_not_inductive() -> None:
    # Static batching is not ahead of continuous batching: the swapped claim fails.
    w = symbolic_workload(3, abstract_pages())
    s, c = fresh_state(3, "s"), fresh_state(3, "c")
    its, itc = iteration(s, w, Rules("static")), iteration(c, w, Rules("continuous"))
    solver = new_solver(INDUCTION)
    solver.add(*w.valid(), *invariant(s, w, "static"), *invariant(c, w, "continuous"))
    solver.add(*its.page_facts, *itc.page_facts, dominates(c, s))
    after = dominates(
        successor(c, itc, w, Rules("continuous")), successor(s, its, w, Rules("static"))
    )
    assert prove_with(solver, after).verdict == REFUTED


def result(verdict: str, expected: str = PROVED) -> ProofResult:
    return ProofResult("c", (), "static", "induction", "1 request", verdict, 0.0, expected)


def test_outcome_keeps_not_proved_apart_from_refuted() -> None:
    assert outcome([result(PROVED), result(REFUTED, REFUTED)]) == PROVED
    assert outcome([result(PROVED), result(NOT_PROVED)]) == NOT_PROVED
    assert outcome([result(NOT_PROVED), result(REFUTED)]) == REFUTED
    assert outcome([result(PROVED, REFUTED)]) == REFUTED  # a broken scheduler went unnoticed


def test_run_proofs_reports_every_catalogue_invariant_it_claims() -> None:
    results = run_proofs(ProofPlan(requests=3, bounds=Bounds(2, 2, 2, 4)))
    assert outcome(results) == PROVED
    claimed = {(i, r.policy) for r in results if r.method == "induction" for i in r.invariants}
    for invariant_id in (
        "PAGE-1",
        "PAGE-3",
        "PAGE-4",
        "PAGE-5",
        "BATCH-1",
        "BATCH-4",
        "REQ-1",
        "REQ-2",
        "DEC-1",
        "DEC-2",
        "LIVE-1",
    ):
        assert {(invariant_id, "static"), (invariant_id, "continuous")} <= claimed
    assert ("BATCH-2", "static") in claimed and ("BATCH-3", "continuous") in claimed


def test_every_catalogue_invariant_is_proved_or_said_not_covered() -> None:
    results = run_proofs(ProofPlan(requests=2, bounds=Bounds(2, 2, 2, 4)))
    claimed = {i for r in results for i in r.invariants}
    for invariant_id in (i.id for i in CATALOGUE):
        assert (invariant_id in claimed) != (invariant_id in proofs.NOT_COVERED), invariant_id


def test_an_unproved_fact_blocks_every_invariant_of_that_proof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # If one auxiliary fact were not proved, the invariant would not be inductive: no catalogue
    # invariant of that policy may then be reported proved.
    original = proofs.prove_inductive

    def one_exhausted(rules: Rules, size: int, rlimit: int) -> list[object]:
        obligations = original(rules, size, rlimit)
        first = obligations[0]
        exhausted = type(first.answer)(NOT_PROVED, 0.0, EXHAUSTED)
        return [type(first)(first.fact, first.ids, first.kind, exhausted), *obligations[1:]]

    monkeypatch.setattr(proofs, "prove_inductive", one_exhausted)
    results = run_proofs(ProofPlan(requests=2, policies=("static",)))
    induction = [r for r in results if r.method == "induction"]
    assert induction and all(r.verdict == NOT_PROVED for r in induction)
    assert outcome(results) == NOT_PROVED


def fake_results(verdict: str) -> Callable[[ProofPlan], tuple[ProofResult, ...]]:
    return lambda plan: (result(PROVED), result(verdict))


@pytest.mark.parametrize(("verdict", "code"), [(PROVED, 0), (REFUTED, 1), (NOT_PROVED, 4)])
def test_prove_exit_codes(
    verdict: str, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(proofs, "run_proofs", fake_results(verdict))
    assert main(["prove"]) == code
    out = capsys.readouterr().out
    if verdict == NOT_PROVED:
        assert "NOT PROVED" in out and "is not a pass" in out


def test_prove_prints_sizes_methods_and_times_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--requests", "2", "--bmc-requests", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outcome"] == PROVED
    methods = {r["method"] for r in report["results"]}
    assert methods == {"lemma", "induction", "BMC"}
    assert all(r["seconds"] >= 0 and r["scope"] for r in report["results"])


def test_prove_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--requests", "0"]) == 2
    assert "--requests must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_twelve_requests_are_proved(policy: str) -> None:
    obligations = prove_inductive(Rules(policy), 12, INDUCTION)
    assert {o.answer.verdict for o in obligations} == {PROVED}


@pytest.mark.slow
def test_the_broken_schedulers_are_refuted_at_the_default_bounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["prove", "--requests", "3", "--broken", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    broken = [r for r in results if r["expected"] == REFUTED]
    assert len(broken) == len(BROKEN) and all(r["verdict"] == REFUTED for r in broken)
    assert all(r["counterexample"]["format"] == 1 for r in broken)
