"""The reference engine scheduler (spec/semantics.md, section 10) under the monitor."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsched.checks.monitor import monitor_run
from kvsched.checks.search.strategies import search_workloads, workloads
from kvsched.cli import main
from kvsched.reference import POLICIES
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import (
    CONFIGS,
    BlockManager,
    EngineConfig,
    EngineScheduler,
)
from kvsched.reference.families import generate
from kvsched.reference.pool import PoolError
from kvsched.spec.applicability import declared_out
from kvsched.spec.protocol import ModelOutput
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.vocabulary import DEFAULT_PROFILE
from kvsched.spec.workload import Limits, Request, Workload

SEARCH_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE)


def _check(workload: Workload, config: EngineConfig) -> None:
    target = EngineScheduler.configured(config)
    result = run(workload, target, properties=config.properties())
    assert result.fault is None, result.fault
    finding = monitor_run(result, config.properties())
    if finding is not None and _may_thrash(config):
        # Such a design may livelock, and LIVE-3 is then the monitor's true verdict, not a false
        # alarm; LIVE-1's bound is, where a prefill chunk below the budget takes LIVE-3 out.
        # Nothing else may be found.
        out = "LIVE-3" in declared_out(config.properties())
        assert finding.invariant == ("LIVE-1" if out else "LIVE-3"), str(finding)
        return
    assert finding is None, str(finding)
    assert result.drained


def _may_thrash(config: EngineConfig) -> bool:
    """A design that admits in a schedule() that preempted can take a victim straight back, and
    thrash: the engine model's witness (spec/proofs.md, section 8.3). No other design may."""
    return config.admit_after_preemption


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_lessons_policies_are_configurations_with_the_same_schedule(policy: str) -> None:
    workload = load_teaching_trace()
    engine = run(workload, EngineScheduler.configured(CONFIGS[policy]))
    lesson = run(workload, POLICIES[policy])
    assert len(engine.events) == {"static": 116, "continuous": 88}[policy]
    assert [e.admitted for e in engine.events] == [e.admitted for e in lesson.events]
    assert [e.finished for e in engine.events] == [e.finished for e in lesson.events]
    _check(workload, CONFIGS[policy])


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("family", ["poisson-short-tight", "bursty-heavy-tight", "shared-prefix"])
def test_named_designs_run_clean_on_families(name: str, family: str) -> None:
    _check(generate(family, 40, 3), CONFIGS[name])


def test_prefix_cache_hits_share_pages_and_preemption_happens() -> None:
    workload = generate("shared-prefix", 80, 2)
    result = run(workload, EngineScheduler.configured(CONFIGS["vllm-v1"]))
    assert sum(sum(e.cached.values()) for e in result.events) > 0
    assert any(e.shared for e in result.events)
    assert sum(len(e.preempted) for e in result.events) > 0
    # the null page is never handed out
    assert all(0 not in table for e in result.events for table in e.page_tables.values())


def test_a_request_ends_when_the_model_says_so_not_at_its_declared_length() -> None:
    scheduler = EngineScheduler(Limits(batch_limit=2, page_size=4, pool_pages=8))
    scheduler.add_request(Request("a", 0, prompt_tokens=3, output_tokens=1))
    for _ in range(3):  # the declared output length (1) is not what stops it
        batch = scheduler.schedule()
        assert batch.decode == ("a",)
        outcome = scheduler.update_from_output(ModelOutput({"a": 1}))
        assert outcome.finished == ()
    scheduler.schedule()
    outcome = scheduler.update_from_output(ModelOutput({"a": 1}, stopped=("a",)))
    assert outcome.finished == ("a",) and outcome.free_pages == 7


def test_the_block_manager_refuses_misuse_and_evicts_least_recently_freed() -> None:
    blocks = BlockManager(4, null_page=True)
    first = blocks.allocate(2)
    assert first == [1, 2] and blocks.free_count == 1
    [h] = blocks.chain([("g", 0)])
    blocks.register(first[0], h)
    blocks.release(first)
    with pytest.raises(PoolError, match="double free"):
        blocks.release([first[1]])
    assert blocks.lookup([h]) == [1]
    blocks.allocate(2)  # 3, then the least recently freed: 2 (tail first), not the cached 1
    assert blocks.lookup([h]) == [1]
    blocks.allocate(1)  # now 1 is evicted
    assert blocks.lookup([h]) == []


def test_a_design_that_cannot_chunk_without_a_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="token_budget"):
        EngineConfig(token_budget=None, chunking="all")


@st.composite
def designs(draw: st.DrawFn, largest: int) -> EngineConfig:
    chunking = draw(st.sampled_from(["all", "first", "none"]))
    # Without chunking a recompute is one step, so the budget holds a whole request (nano-vllm
    # asserts max_num_batched_tokens >= max_model_len for the same reason).
    budget = draw(st.integers(1, 12)) if chunking != "none" else largest + draw(st.integers(0, 4))
    batching = draw(st.sampled_from(["mixed", "prefill-first"]))
    order = draw(st.sampled_from(["fcfs", "priority", "shortest-first"]))
    victim = draw(st.sampled_from(["last", "priority"]))
    chunked = chunking == "all"
    # A cap on the batch's prefills is a mixed batch's, and a priority victim's spent place is
    # allowed for only under the priority order (EngineConfig says why).
    capped = chunked and batching == "mixed" and (victim == "last" or order == "priority")
    return EngineConfig(
        token_budget=budget,
        chunking=chunking,
        batching=batching,
        order=order,
        victim=victim,
        prefill_chunk=draw(st.none() | st.integers(1, 6)) if chunked else None,
        max_partial_prefills=draw(st.none() | st.integers(1, 3)) if capped else None,
        prefix_caching=draw(st.booleans()),
        watermark_pages=draw(st.integers(0, 2)),
        null_page=draw(st.booleans()),
        static=draw(st.booleans()),
        admit_after_preemption=draw(st.booleans()),
        name="engine",
    )


@st.composite
def engine_cases(draw: st.DrawFn) -> tuple[Workload, EngineConfig]:
    workload = draw(workloads(max_requests=5))
    groups = draw(st.lists(st.sampled_from(["", "p", "q"]), min_size=len(workload.requests)))
    requests = []
    for request, group in zip(workload.requests, [*groups, *[""] * 9], strict=False):
        shared = draw(st.integers(0, request.prompt_tokens)) if group else 0
        priority = draw(st.integers(0, 2))
        requests.append(
            replace(request, prefix_group=group, prefix_tokens=shared, priority=priority)
        )
    largest = max(r.prompt_tokens + r.output_tokens for r in requests)
    config = draw(designs(largest))
    pool = workload.limits.pool_pages + (1 if config.null_page else 0)
    limits = replace(workload.limits, pool_pages=pool)
    return replace(workload, limits=limits, requests=tuple(requests)), config


@given(engine_cases())
def test_every_combination_of_features_passes_the_monitor(
    case: tuple[Workload, EngineConfig],
) -> None:
    workload, config = case
    _check(workload, config)


@st.composite
def crowded_engine_cases(draw: st.DrawFn) -> tuple[Workload, EngineConfig]:
    """The search's workloads (swarm-tested, shared prefixes among them), as large as the loaded
    profile's search draws: up to 64 requests in ci, 256 in thorough."""
    workload = draw(search_workloads(SEARCH_PROFILE))
    requests = tuple(replace(r, priority=draw(st.integers(0, 2))) for r in workload.requests)
    config = draw(designs(max(r.prompt_tokens + r.output_tokens for r in requests)))
    pool = workload.limits.pool_pages + (1 if config.null_page else 0)
    limits = replace(workload.limits, pool_pages=pool)
    return replace(workload, limits=limits, requests=requests), config


@settings(max_examples=max(10, settings.default.max_examples // 4))  # a quarter: ~0.3 s each
@given(crowded_engine_cases())
def test_crowded_runs_of_every_design_pass_the_monitor(
    case: tuple[Workload, EngineConfig],
) -> None:
    # Bugs in preemption and sharing need a crowd: dozens active, a queue, groups sharing pages.
    workload, config = case
    _check(workload, config)


@pytest.mark.parametrize("target", ["VLLMV1Scheduler", "NanoChunkedScheduler"])
def test_kvsched_check_gives_a_class_that_declares_preemption_a_clean_verdict(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", f"kvsched.reference.engine_scheduler:{target}"]) == 0
    assert "every invariant holds" in capsys.readouterr().out


THRASH = Workload("thrash", Limits(2, 1, 7), (Request("r0", 0, 3, 2), Request("r1", 0, 6, 1)))
"""The engine model's witness (spec/proofs.md): prefill-first with no prefix cache cuts r1's
chunk, which preempts itself and, if admission follows a preemption, comes back every iteration."""

THRASHING = EngineConfig(
    token_budget=4, chunking="all", batching="prefill-first", prefix_caching=False,
    watermark_pages=0, null_page=False, admit_after_preemption=True, name="thrashing",
)  # fmt: skip


def test_admitting_nobody_after_a_preemption_ends_the_thrash() -> None:
    # The reference's prefill-first designs used to re-admit the chunk that had just preempted
    # itself: this run never drained. Admitting nobody in that schedule() lets r0 decode.
    config = replace(THRASHING, admit_after_preemption=False)
    _check(THRASH, config)
    result = run(THRASH, EngineScheduler.configured(config), properties=config.properties())
    assert any(e.preempted for e in result.events)


def test_a_thrashing_target_ends_at_the_bound_with_a_verdict() -> None:
    # Each preemption earns its recompute only after progress, so a target that cycles forever
    # does not push the bound ahead of every iteration: the run ends, and LIVE-3 says why.
    target = EngineScheduler.configured(THRASHING)
    result = run(THRASH, target, properties=THRASHING.properties())
    assert not result.drained
    assert len(result.events) < 100
    finding = monitor_run(result, THRASHING.properties())
    assert finding is not None and (finding.invariant, finding.iteration) == ("LIVE-3", 4)


def test_a_workload_the_reserved_page_makes_unservable_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vLLM keeps page 0 as its null page: a request needing all 4 pages of a 4-page pool can never
    # run. That is the workload's fault, not the scheduler's: exit 2 naming the file, not LIVE-1.
    import json

    from kvsched.spec.workload import workload_to_json

    workload = Workload("full", Limits(1, 4, 4), (Request("r0", 0, 12, 4),))
    path = tmp_path / "full.json"
    path.write_text(json.dumps(workload_to_json(workload)))
    target = "kvsched.reference.engine_scheduler:VLLMV1Scheduler"
    assert main(["check", target, "--workload", str(path), "--no-hypothesis"]) == 2
    error = capsys.readouterr().err
    assert str(path) in error and "reserved_pages" in error and "at least 5" in error


def test_a_priority_victim_scheduled_earlier_releases_only_what_it_held() -> None:
    # Found by the crowd search: r7 (priority 1) is given a page in a schedule() that later
    # preempts it for r6; its preemption must not list that page, which never showed in a table.
    config = EngineConfig(
        token_budget=7, chunking="all", order="shortest-first", victim="priority",
        prefix_caching=False, null_page=False, name="priority-victim",
    )  # fmt: skip
    shapes = [("r0", 0, 3, 3, 0), ("r1", 1, 4, 2, 0), ("r2", 4, 0, 3, 0), ("r3", 0, 5, 2, 1)]
    shapes += [("r5", 2, 4, 1, 1), ("r6", 3, 5, 1, 0), ("r7", 2, 5, 4, 1)]
    requests = tuple(Request(rid, a, p, o, priority=pr) for rid, a, p, o, pr in shapes)
    workload = Workload("priority-victim", Limits(3, 1, 10), requests)
    result = run(workload, EngineScheduler.configured(config), properties=config.properties())
    assert any(e.preempted for e in result.events)  # the case happens
    _check(workload, config)


def test_a_preemption_that_lets_the_batch_progress_is_not_thrash() -> None:
    # 'a' (lower priority) preempts itself in iteration 3, is re-admitted in 4 (prefill-first, so
    # 'b' does not decode), and is preempted by 'b' in 5: twice with no progress between, but
    # the second preemption is what lets 'b' decode in that iteration, and the run drains. Judged
    # at the moment of preemption this read as LIVE-3 on a correct design.
    workload = Workload(
        "priority-victim",
        Limits(2, 1, 2),
        (Request("a", 0, 0, 2, priority=1), Request("b", 0, 0, 2, priority=0)),
    )
    config = EngineConfig(
        token_budget=1, batching="prefill-first", victim="priority", prefix_caching=False,
        null_page=False, name="priority",
    )  # fmt: skip
    result = run(workload, EngineScheduler.configured(config), properties=config.properties())
    assert [e.preempted for e in result.events][2:5] == [("a",), (), ("a",)]
    _check(workload, config)
