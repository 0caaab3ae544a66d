"""The bounded Z3 model of the engine scheduler with preemption (spec/proofs.md, section 8).

Small sizes by default, a few seconds each; the sizes spec/proofs.md quotes run under
@pytest.mark.slow. The model is cross-checked against the reference scheduler step by step, its
thrash witness is replayed on the reference through the monitor, and each proof is shown able
to fail.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsched.checks.monitor import monitor_run
from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.engine import induction, liveness, step
from kvsched.checks.proofs.engine.claims import no_thrash
from kvsched.checks.proofs.engine.design_scope import engine_scope
from kvsched.checks.proofs.engine.induction import prove_safety
from kvsched.checks.proofs.engine.liveness import prove_no_thrash
from kvsched.checks.proofs.engine.results import EnginePlan, run_engine_proofs
from kvsched.checks.proofs.engine.trajectories import (
    concrete_system,
    confirm,
    model_trajectory,
    reference_trajectory,
)
from kvsched.checks.proofs.engine.unroll import EngineBounds, engine_config, search
from kvsched.checks.proofs.query import NOT_PROVED, PROVED, REFUTED
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import VLLM_V1, EngineScheduler
from kvsched.spec.scope import OutOfScope
from kvsched.spec.workload import Limits, Request, Workload, pages_for

SEARCH, INDUCTION = DEFAULT.engine_search, DEFAULT.engine_induction
# A proof expected to fail must fail on its logic, never on its budget.
WRONG = "counterexample to induction"


def live3(s: Any, before: Any, it: Any, after: Any) -> list[Any]:
    return [no_thrash(it)]


@st.composite
def engine_runs(draw: st.DrawFn) -> tuple[Workload, Any]:
    page_size = draw(st.integers(1, 3))
    pool = draw(st.integers(2, 8))
    requests = []
    for i in range(draw(st.integers(1, 3))):
        prompt = draw(st.integers(0, 8))
        most = pool * page_size - prompt
        if most < 1:
            continue
        output = draw(st.integers(1, min(4, most)))
        assert pages_for(prompt + output, page_size) <= pool
        requests.append(Request(f"r{i}", draw(st.integers(0, 3)), prompt, output))
    limits = Limits(draw(st.integers(1, 3)), page_size, pool)
    workload = Workload("drawn", limits, tuple(requests) or (Request("r0", 0, 1, 1),))
    batching = draw(st.sampled_from(("mixed", "prefill-first")))
    budget, watermark = draw(st.integers(1, 6)), draw(st.integers(0, 2))
    return workload, engine_config(batching, budget, watermark, draw(st.booleans()))


def _same_schedule(workload: Workload, config: Any) -> None:
    model = model_trajectory(workload, config, 10)
    reference = reference_trajectory(workload, config, 10)
    assert [m.__class__(**{**m.__dict__, "thrash": False}) for m in model] == list(reference)


@settings(max_examples=10, deadline=None)
@given(engine_runs())
def test_the_model_schedules_exactly_as_the_reference(drawn: tuple[Workload, Any]) -> None:
    _same_schedule(*drawn)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(engine_runs())
def test_the_model_schedules_as_the_reference_on_more_workloads(
    drawn: tuple[Workload, Any],
) -> None:
    _same_schedule(*drawn)


def test_a_design_outside_the_model_is_refused() -> None:
    scope = engine_scope(VLLM_V1)
    assert not scope.covered
    assert "prefix_caching" in scope.reason and "null_page" in scope.reason
    with pytest.raises(OutOfScope):
        concrete_system(Workload("w", Limits(1, 1, 2), (Request("a", 0, 1, 1),)), VLLM_V1)


def test_prefill_first_admitting_after_a_preemption_thrashes_and_the_reference_confirms_it() -> (
    None
):
    bounds = EngineBounds(page_sizes=(1,), horizon=4, watermark=0, admit_after_preemption=True)
    answer = search("prefill-first", bounds, live3, SEARCH)
    assert answer.verdict == REFUTED and answer.found is not None
    found = answer.found
    assert found.config.admit_after_preemption
    seen = confirm(found.workload, found.config, 60, found.iteration)
    assert (seen.invariant, seen.iteration) == ("LIVE-3", found.iteration)
    assert seen.same_schedule and not seen.drained


WM0 = Workload("wm0", Limits(2, 1, 7), (Request("r0", 0, 3, 2), Request("r1", 0, 6, 1)))


def test_the_documented_witness_thrashes_on_the_reference() -> None:
    seen = confirm(WM0, engine_config("prefill-first", 4, 0, True), 200, 4)
    assert (seen.invariant, seen.iteration, seen.same_schedule) == ("LIVE-3", 4, True)
    assert not seen.drained
    # With the prefix cache (outside the model) the preempted request's pages come back as a hit.
    cached = replace(engine_config("prefill-first", 4, 0, True), prefix_caching=True)
    result = run(WM0, EngineScheduler.configured(cached), properties=cached.properties())
    assert result.drained and monitor_run(result, cached.properties()) is None


def test_admitting_nobody_after_a_preemption_drains_the_documented_witness() -> None:
    seen = confirm(WM0, engine_config("prefill-first", 4, 0), 200, 10)
    assert (seen.invariant, seen.same_schedule, seen.drained) == ("", True, True)
    preempted = [
        v.preempted for v in model_trajectory(WM0, engine_config("prefill-first", 4, 0), 10)
    ]
    assert any(preempted)


def test_a_watermark_does_not_stop_the_prefill_first_thrash() -> None:
    # The reproduced witness of watermark 2: admission keeps two pages spare, and the next chunk
    # needs three.
    workload = Workload("wm2", Limits(2, 1, 7), (Request("r0", 0, 2, 3), Request("r1", 0, 6, 1)))
    seen = confirm(workload, engine_config("prefill-first", 3, 2, True), 60, 4)
    assert (seen.invariant, seen.iteration, seen.same_schedule) == ("LIVE-3", 4, True)
    for batching, admits in (("mixed", True), ("mixed", False), ("prefill-first", False)):
        assert confirm(workload, engine_config(batching, 3, 2, admits), 60, 8).invariant == ""


@pytest.mark.parametrize(("batching", "admits"), [("mixed", None), ("prefill-first", False)])
def test_no_thrash_within_small_bounds(batching: Any, admits: bool | None) -> None:
    bounds = EngineBounds(page_sizes=(1,), horizon=4, admit_after_preemption=admits)
    assert search(batching, bounds, live3, SEARCH).verdict == PROVED


def test_no_thrash_by_induction_unless_prefill_first_admits_after_a_preemption() -> None:
    assert prove_no_thrash("mixed", 2, 1, INDUCTION, None).verdict == PROVED
    assert prove_no_thrash("prefill-first", 2, 1, INDUCTION, False).verdict == PROVED
    # The same facts are not inductive for the design that thrashes.
    thrashes = prove_no_thrash("prefill-first", 2, 1, INDUCTION, True)
    assert (thrashes.verdict, thrashes.reason) == (NOT_PROVED, WRONG)


@pytest.mark.parametrize("fact", ["recomputing-is-last", "stamps-below-progress"])
def test_the_no_thrash_induction_fails_without_its_strengthening(
    monkeypatch: Any, fact: str
) -> None:
    facts = liveness.named_progress_facts

    def weaker(s: Any, state: Any) -> dict[str, list[Any]]:
        named = facts(s, state)
        del named[fact]
        return named

    monkeypatch.setattr(liveness, "named_progress_facts", weaker)
    answer = prove_no_thrash("prefill-first", 2, 1, INDUCTION, False)
    assert (answer.verdict, answer.reason) == (NOT_PROVED, WRONG)


def test_the_model_admitting_after_every_preemption_is_caught(monkeypatch: Any) -> None:
    # The model as it stood before the reference stopped admitting after a preemption in
    # prefill-first: the cross-check with the reference tells them apart on the witness.
    admit = step._Work.admit

    def always(self: Any, tokens: Any, enabled: Any) -> None:
        admit(self, tokens, True)

    monkeypatch.setattr(step._Work, "admit", always)
    assert not confirm(WM0, engine_config("prefill-first", 4, 0), 10, 10).same_schedule


@pytest.mark.parametrize(("batching", "page_size"), [("mixed", 2), ("prefill-first", 1)])
def test_the_safety_layer_is_inductive(batching: Any, page_size: int) -> None:
    assert prove_safety(batching, 2, page_size, INDUCTION).verdict == PROVED


def test_the_induction_fails_without_its_strengthening(monkeypatch: Any) -> None:
    # A request not yet arrived holds no KV: without it, an arrival could bring KV with it.
    def weaker(s: Any, state: Any) -> list[Any]:
        named = induction.named_state_facts(s, state)
        del named["not-arrived-is-empty"]
        return [f for group in named.values() for f in group]

    monkeypatch.setattr(induction, "state_facts", weaker)
    answer = prove_safety("mixed", 2, 1, INDUCTION)
    assert (answer.verdict, answer.reason) == (NOT_PROVED, WRONG)


def test_the_induction_fails_when_a_preemption_keeps_its_pages(monkeypatch: Any) -> None:
    release = step._Work.preempt

    def keeps(self: Any, victim: Any, when: Any) -> None:
        free = self.free
        release(self, victim, when)
        self.free = free

    monkeypatch.setattr(step._Work, "preempt", keeps)
    answer = prove_safety("mixed", 2, 1, INDUCTION)
    assert (answer.verdict, answer.reason) == (NOT_PROVED, WRONG)
    assert "pool-conservation" in answer.failed


@pytest.mark.slow
def test_the_proof_set_at_the_documented_sizes() -> None:
    results = run_engine_proofs(EnginePlan())
    assert all(r.as_expected for r in results), [(r.claim, r.verdict, r.detail) for r in results]
