"""The efficiency figures (EFF-1..EFF-4): measured from events, never a violation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsched.reference import POLICIES
from kvsched.reference.efficiency import DistinctPages, Meter, measure
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


def _distinct(tables: dict[str, tuple[int, ...]]) -> int:
    return len({page for table in tables.values() for page in table})


@settings(max_examples=50)
@given(st.integers(0, 2**32 - 1))
def test_distinct_pages_counted_by_changes_agree_with_a_whole_count(seed: int) -> None:
    # Tables that carry over (the same tuple), grow at their end, are rebuilt equal, shrink,
    # are replaced, leave and come back; pages shared between tables, and repeated in one.
    draw = random.Random(seed)
    held = DistinctPages()
    tables: dict[str, tuple[int, ...]] = {}
    for _ in range(60):
        for rid in [f"r{i}" for i in range(12)]:
            table = tables.get(rid)
            move = draw.random()
            if table is None:
                if move < 0.4:
                    tables[rid] = tuple(draw.randrange(40) for _ in range(draw.randrange(6)))
            elif move < 0.3:
                tables[rid] = (*table, draw.randrange(40))
            elif move < 0.4:
                tables[rid] = tuple(list(table))  # equal, not the same tuple
            elif move < 0.5:
                tables[rid] = table[: draw.randrange(len(table) + 1)]
            elif move < 0.6:
                tables[rid] = tuple(draw.randrange(40) for _ in range(draw.randrange(6)))
            elif move < 0.7:
                del tables[rid]
        if draw.random() < 0.7:  # the meter counts only some iterations
            assert held.count(dict(tables)) == _distinct(tables)
    assert held.count({}) == 0
    assert not held.holders and not held.tables


@pytest.mark.parametrize("config", ["vllm-v1", "nano", "static"])
def test_the_pages_counted_by_changes_are_those_counted_whole(config: str) -> None:
    # Tight pools and shared prefixes: whether the head fits turns on the distinct pages held.
    # Counted where the meter counts them (a free slot and a queue); the meter is compiled, so
    # its counter cannot be swapped for one that counts whole.
    workload = generate("poisson-long-tight", 150, 2)
    design = CONFIGS[config]
    events = run(workload, EngineScheduler.configured(design), properties=design.properties())
    meter, held, counted = Meter(workload, design.properties()), DistinctPages(), 0
    for event in events.events:
        meter.observe(event)
        if len(event.active) < workload.limits.batch_limit and event.waiting:
            assert held.count(event.page_tables) == _distinct(dict(event.page_tables))
            counted += 1
    assert counted and meter.figures().idle_slot_iterations > 0


@pytest.mark.parametrize("config", ["vllm-v1", "nano", "static", "continuous", "lesson-static"])
def test_the_meter_reads_the_monitors_records_as_it_counts_its_own(config: str) -> None:
    # One record per request: the meter of a checked run reads the records the monitor moved
    # (after judging each event), the meter of a bare run counts its own. Preemption, recompute,
    # prefix hits and chunked prefill (the engines) and the lesson model (the policies) must
    # come to the same figures either way.
    from kvsched.checks.monitor.runtime import Monitor

    workload = generate("poisson-long-tight", 120, 3)
    if config.startswith("lesson-") or config == "continuous":
        policy = config.removeprefix("lesson-")
        events, properties = run(workload, POLICIES[policy]).events, None
    else:
        design = CONFIGS[config]
        properties = design.properties()
        stepped = run(workload, EngineScheduler.configured(design), properties=properties)
        events, policy = stepped.events, properties.policy
    monitor = Monitor(workload, policy, properties)
    # As a checked log's meter reads them: the records, and the distinct pages from the ledger.
    ledger = monitor.pages
    shared = Meter(workload, properties, monitor.requests.records, ledger.held_as_scheduled)
    for event in events:
        assert monitor.observe(event) is None
        assert ledger.held_as_scheduled(event) == event.pages_in_use
        shared.observe(event)
    alone = measure(workload, events, properties)
    assert shared.figures() == alone
    if properties is not None and config != "static":
        assert alone.preemptions and alone.recomputed_tokens  # the counts the records share
