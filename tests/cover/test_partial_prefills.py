"""``max_partial_prefills``: a design that caps the batch's prefills in flight states it, and
BATCH-6 excuses exactly the prefill the cap held back, judged from the monitor's records."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace

import pytest

from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.mutants.engine import (
    CAPPED,
    TWO_PREFILLS,
    CapsPartialPrefills,
    SkipsPastTheCap,
)
from kvsched.checks.record.base import RecordOptions
from kvsched.checks.record.vllm import properties as vllm_properties
from kvsched.checks.verdict.declarations import excuses
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import VLLM_V1, EngineConfig, EngineScheduler
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq
from kvsched.spec.properties import PropertiesError, TargetProperties, parse_properties
from kvsched.spec.workload import Limits, Request, Workload


def _check(
    target: type[EngineScheduler], workload: Workload, properties: TargetProperties
) -> tuple[Finding | None, Excused]:
    recorded = run(workload, target, properties.policy, properties=properties)
    return watch_run(recorded, properties)


CORRECT = CapsPartialPrefills


def test_the_declaration_needs_chunked_prefill_and_the_batch_first() -> None:
    base = CAPPED.properties()
    assert base.max_partial_prefills == 1 and base.serves_running
    with pytest.raises(PropertiesError, match="declare serves_running"):
        replace(base, serves_running=False)
    with pytest.raises(PropertiesError, match="must be an integer >= 1"):
        replace(base, max_partial_prefills=0)
    document = {"policy": "continuous", "token_budget": 8, "max_partial_prefills": 2}
    with pytest.raises(PropertiesError, match="declare chunked_prefill"):
        parse_properties(document)
    made = parse_properties({**document, "chunked_prefill": True, "serves_running": True})
    assert made.max_partial_prefills == 2


def test_the_capped_design_passes_a_prefill_over_and_the_declaration_excuses_it() -> None:
    properties = CAPPED.properties()
    finding, excused = _check(CORRECT, TWO_PREFILLS, properties)
    assert finding is None
    assert excused.capped_prefills == 2  # b waited in iterations 2 and 3, behind a's prefill
    listed = {e.declaration: e for e in excuses(properties, "continuous", excused)}
    excuse = listed["max_partial_prefills"]
    assert (excuse.invariants, excuse.count) == (("BATCH-6",), 2)
    assert excuse.excused.startswith(
        "2 iterations left a prefill of the batch waiting once 1 prefill of the batch computed"
    )
    # The same run without the declaration: the prefill passed over is BATCH-6.
    undeclared = replace(properties, max_partial_prefills=None)
    finding, _ = _check(CORRECT, TWO_PREFILLS, undeclared)
    assert finding is not None and finding.invariant == "BATCH-6"
    assert (finding.iteration, finding.requests) == (2, ("b",))


def test_a_decode_left_out_behind_the_cap_is_still_batch_6() -> None:
    finding, _ = _check(SkipsPastTheCap, TWO_PREFILLS, SkipsPastTheCap.properties)
    assert finding is not None and finding.invariant == "BATCH-6"
    assert finding.requests == ("c",)
    assert "excuses only a request in its prefill, not a decode" in finding.message


class CapsBelowItsDeclaration(EngineScheduler):
    """Declares two prefills in flight but serves one: the second waits below the cap."""

    config = CAPPED
    properties = replace(CAPPED.properties(), max_partial_prefills=2)


def test_a_prefill_left_out_below_the_declared_cap_is_still_batch_6() -> None:
    finding, _ = _check(CapsBelowItsDeclaration, TWO_PREFILLS, CapsBelowItsDeclaration.properties)
    assert finding is not None and finding.invariant == "BATCH-6"
    assert finding.requests == ("b",)
    assert "computed 1 prefill chunk, below the declared cap of 2 partial prefills" in (
        finding.message
    )


class SaysItsDecodeIsAPrefill(EngineScheduler):
    """Skips a decode and treats it as a prefill: the monitor reads that from its own records,
    not from the target."""

    config = CAPPED
    properties = CAPPED.properties()

    def _run(self, step: Step, seqs: Iterable[Seq]) -> None:
        for seq in seqs:
            seq.admitted_with = seq.generated  # the lie: every request looks fresh to the cap
        super()._run(step, self.running)


def test_the_excuse_is_judged_from_the_records_not_the_targets_say_so() -> None:
    finding, _ = _check(SaysItsDecodeIsAPrefill, TWO_PREFILLS, SaysItsDecodeIsAPrefill.properties)
    assert finding is not None and finding.invariant == "BATCH-6"
    assert finding.requests == ("c",)


def _workloads(count: int, seed: int) -> Iterable[Workload]:
    rng = random.Random(seed)
    for _ in range(count):
        page = rng.choice([2, 4, 8])
        requests = tuple(
            Request(f"r{i}", rng.randint(0, 6), rng.randint(1, 40), rng.randint(1, 6),
                    priority=rng.randint(0, 3))
            for i in range(rng.randint(2, 7))
        )  # fmt: skip
        peak = max(-(-(r.prompt_tokens + r.output_tokens) // page) for r in requests)
        limits = Limits(rng.randint(1, 5), page, peak + 1 + rng.randint(0, 2 * peak))
        yield Workload("random", limits, requests)


@pytest.mark.parametrize("order", ["fcfs", "priority"])
def test_the_capped_design_checks_clean_on_random_workloads(order: str) -> None:
    rng = random.Random(7)
    capped = 0
    for workload in _workloads(120, seed=11 if order == "fcfs" else 12):
        config = EngineConfig(
            token_budget=rng.randint(4, 24),
            prefill_chunk=rng.choice([None, 2, 3, 5]),
            max_partial_prefills=rng.randint(1, 3),
            order="priority" if order == "priority" else "fcfs",
            victim="priority" if order == "priority" else "last",
            prefix_caching=rng.random() < 0.5,
            name="capped",
        )
        target = EngineScheduler.configured(config)
        finding, excused = _check(target, workload, config.properties())
        assert finding is None, (config, workload, finding)
        capped += excused.capped_prefills
    assert capped > 0  # the cap held prefills back, and the monitor excused each


def test_a_priority_victim_scheduled_earlier_held_its_place_in_the_cap() -> None:
    # In iteration 9 r2 and r3 take the cap's two places; r3 needs a page and preempts r2, the
    # lowest priority, which the loop had served already. Its place stays spent, so r4 is passed
    # over with one prefill computed: the preemption counts, and the skip is excused.
    config = EngineConfig(
        token_budget=14, prefill_chunk=3, max_partial_prefills=2, order="priority",
        victim="priority", prefix_caching=False, name="capped-priority",
    )  # fmt: skip
    workload = Workload(
        "priority-victim",
        Limits(batch_limit=4, page_size=8, pool_pages=9),
        (
            Request("r0", 4, 2, 5, priority=2),
            Request("r1", 0, 25, 1, priority=0),
            Request("r2", 2, 32, 6, priority=3),
            Request("r3", 3, 21, 5, priority=1),
            Request("r4", 4, 35, 1, priority=2),
        ),
    )
    recorded = run(workload, EngineScheduler.configured(config), "continuous",
                   properties=config.properties())  # fmt: skip
    [ninth] = [e for e in recorded.events if e.iteration == 9]
    assert ninth.preempted == ("r2",) and dict(ninth.computed or {}) == {"r3": 3, "r0": 1}
    finding, _ = watch_run(recorded, config.properties())
    assert finding is None


def test_vllm_v1_and_the_vllm_recorder_declare_no_cap() -> None:
    # vLLM 0.33's SchedulerConfig has no max_num_partial_prefills: its running loop passes a
    # request over only when it has nothing to compute, which a recording never meets.
    assert VLLM_V1.properties().max_partial_prefills is None
    workload = Workload("w", Limits(2, 4, 8), (Request("a", 0, 4, 2),))
    assert vllm_properties(workload, RecordOptions()).max_partial_prefills is None


def test_the_chunk_cap_is_lifted_for_a_request_alone_as_vllm_does() -> None:
    # vLLM 0.33 applies long_prefill_token_threshold only while more than one request runs or
    # waits: a alone computes 8 tokens at once, then b arrives and both are held to 4.
    config = replace(VLLM_V1, token_budget=8, prefill_chunk=4, name="chunk-cap")
    workload = Workload(
        "lone-then-two", Limits(2, 4, 16), (Request("a", 0, 20, 2), Request("b", 1, 20, 2))
    )
    target = EngineScheduler.configured(config)
    recorded = run(workload, target, "continuous", properties=config.properties())
    computed = [dict(e.computed or {}) for e in recorded.events[:3]]
    assert computed == [{"a": 8}, {"a": 4, "b": 4}, {"a": 4, "b": 4}]
    assert watch_run(recorded, config.properties())[0] is None


def test_the_reference_refuses_a_cap_it_cannot_state() -> None:
    with pytest.raises(ValueError, match="needs chunking 'all'"):
        replace(VLLM_V1, chunking="first", max_partial_prefills=1)
    with pytest.raises(ValueError, match="running loop of a mixed batch"):
        replace(VLLM_V1, batching="prefill-first", max_partial_prefills=1)
    with pytest.raises(ValueError, match="needs order priority"):
        replace(VLLM_V1, victim="priority", max_partial_prefills=1)
