"""The efficiency figures (EFF-1..EFF-4): measured from events, never a violation."""

from __future__ import annotations

from kvsched.reference import POLICIES
from kvsched.reference.efficiency import measure
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.reference.families import generate
from kvsched.spec.invariants import EFFICIENCY
from kvsched.spec.teaching import load_teaching_trace


def test_static_batching_idles_slots_and_continuous_does_not_on_the_teaching_trace() -> None:
    workload = load_teaching_trace()
    static = measure(workload, run(workload, POLICIES["static"]).events)
    continuous = measure(workload, run(workload, POLICIES["continuous"]).events)
    assert static.idle_slot_iterations > 0
    assert continuous.idle_slot_iterations == 0
    # lazy, minimal pages and no preemption in the lesson's model
    assert static.unused_page_iterations == continuous.unused_page_iterations == 0
    assert static.preemptions == continuous.recomputed_tokens == 0


def test_preemption_is_counted_with_the_tokens_it_makes_recompute() -> None:
    workload = generate("poisson-long-tight", 60, 1)
    config = CONFIGS["vllm-v1"]
    events = run(workload, EngineScheduler.configured(config), properties=config.properties())
    figures = measure(workload, events.events, config.properties())
    preempted = sum(len(e.preempted) for e in events.events)
    assert figures.preemptions == preempted > 0
    assert figures.recomputed_tokens > 0
    assert set(figures.by_id()) == {figure.id for figure in EFFICIENCY}
