"""The fast path and the Z3 models state their scope and refuse what they do not model.

Each side is tested: what is in scope runs (and, for the replay, agrees with the stepped engine
elsewhere in the suite); what is out of scope is refused with the reason and what to use instead.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvsched.checks.proofs.lesson_scope import model_scope, teaching_scope, workload_scope
from kvsched.checks.proofs.model import Rules
from kvsched.checks.proofs.teaching.model import TeachingModel
from kvsched.checks.proofs.teaching.reconstruct import build_workload
from kvsched.checks.proofs.workload import concrete_workload
from kvsched.reference.fastpath import replay
from kvsched.reference.fastpath_scope import replay_scope
from kvsched.spec.properties import TargetProperties
from kvsched.spec.scope import OutOfScope
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload, WorkloadError

TRACE = load_teaching_trace()
LESSON = TargetProperties(policy="continuous")
DECLARATIONS = [
    TargetProperties(policy="continuous", admission="lazy", preemption=True),
    TargetProperties(policy="continuous", token_budget=8, chunked_prefill=True),
    TargetProperties(policy="continuous", prefix_sharing=True),
    TargetProperties(policy="static", reserve_ahead=True),
    TargetProperties(policy="continuous", reserved_pages=(0,)),
    TargetProperties(policy="continuous", watermark_pages=1),
]


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_replay_covers_the_reference_policies(policy: str) -> None:
    assert replay_scope(TRACE, policy).covered
    assert replay_scope(TRACE, policy, TargetProperties(policy=policy)).covered


@pytest.mark.parametrize("properties", DECLARATIONS, ids=repr)
def test_the_replay_refuses_an_engine_feature(properties: TargetProperties) -> None:
    scope = replay_scope(TRACE, properties.policy, properties)
    assert not scope.covered
    assert "lesson model only" in scope.reason and "stepped engine" in scope.instead


def test_the_replay_refuses_another_policy_with_what_to_use() -> None:
    scope = replay_scope(TRACE, "priority")
    assert not scope.covered and "'priority' is not a reference policy" in scope.reason
    with pytest.raises(OutOfScope, match="Use instead: the stepped engine"):
        replay(TRACE, "priority")
    mismatch = replay_scope(TRACE, "static", TargetProperties(policy="continuous"))
    assert not mismatch.covered and "declares policy 'continuous'" in mismatch.reason


@pytest.mark.parametrize(
    ("requests", "reason"),
    [
        ((), "no requests"),
        ((Request("a", 0, 1, 1), Request("a", 1, 1, 1)), "duplicate request id"),
        ((Request("a", 0, 1, 0),), "output_tokens >= 1"),
        ((Request("a", 0, 64, 1),), "could never be admitted"),
    ],
)
def test_an_invalid_workload_is_out_of_every_scope(
    requests: tuple[Request, ...], reason: str
) -> None:
    workload = Workload("bad", Limits(batch_limit=2, page_size=4, pool_pages=4), requests)
    for scope in (replay_scope(workload, "static"), workload_scope(workload)):
        assert not scope.covered and reason in scope.reason
    with pytest.raises(WorkloadError, match=reason):
        replay(workload, "static")
    with pytest.raises(OutOfScope, match=reason):
        concrete_workload(workload)


def test_the_z3_model_covers_the_lesson_model_only() -> None:
    assert model_scope(LESSON).covered and Rules.of(LESSON) == Rules("continuous")
    for properties in DECLARATIONS:
        scope = model_scope(properties)
        assert not scope.covered and "runtime monitor" in scope.instead
        with pytest.raises(OutOfScope, match="the Z3 model does not model this"):
            Rules.of(properties)


def test_the_z3_model_refuses_another_policy() -> None:
    # Before it stated its scope, any other name silently got continuous batching's admission.
    with pytest.raises(OutOfScope, match="'round-robin' is not a reference policy"):
        Rules("round-robin")
    assert not model_scope(TargetProperties()).covered  # no policy declared at all


def test_the_teaching_model_covers_its_shape_only() -> None:
    assert teaching_scope(TRACE).covered and teaching_scope(TRACE, LESSON).covered
    TeachingModel().pin(TRACE)
    eight = replace(TRACE, requests=TRACE.requests[:8])
    wide = replace(TRACE, limits=replace(TRACE.limits, batch_limit=4))
    tight = build_workload([0] * 9, [100] * 9)
    shuffled = replace(
        TRACE, requests=(TRACE.requests[3], *TRACE.requests[:3], *TRACE.requests[4:])
    )
    cases = {
        eight: "has 8 requests",
        wide: "batch limit is 4",
        replace(tight, limits=replace(tight.limits, pool_pages=30)): "can bind",
        shuffled: "not declared in arrival order",
    }
    for workload, reason in cases.items():
        assert not teaching_scope(workload).covered and reason in teaching_scope(workload).reason
        with pytest.raises(OutOfScope, match="the teaching model does not model this"):
            TeachingModel().pin(workload)
    lazy = TargetProperties(policy="continuous", admission="lazy")
    assert "admission='lazy'" in teaching_scope(TRACE, lazy).reason
