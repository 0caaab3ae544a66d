"""The engine scheduler's batched replay gives exactly the stepped engine's figures, or steps aside.

``engine_metrics`` must equal ``engine.run`` + ``compute_metrics`` on every metric of section 7,
floats bit for bit, for any configuration of the engine scheduler: from the batched replay where
it is exact, from the stepped engine where the run leaves its scope (a preemption, a decode
batch over the budget) or the configuration does (another order, prefix hits). The tests also
check that the replay is the path really taken where it should be, else the comparison would
prove nothing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kvsched.checks.search.strategies import workloads
from kvsched.reference import compute_metrics, run
from kvsched.reference.engine_fastpath import Fallback, engine_metrics, engine_replay
from kvsched.reference.engine_scheduler import CONFIGS, EngineConfig, EngineScheduler
from kvsched.reference.engine_scope import engine_replay_scope
from kvsched.reference.families import generate
from kvsched.reference.metrics import RunMetrics
from kvsched.spec.scope import OutOfScope
from kvsched.spec.workload import Limits, Request, Workload


def stepped(workload: Workload, config: EngineConfig) -> tuple[RunMetrics, int]:
    """The stepped engine's figures, and how many preemptions its run made."""
    factory = EngineScheduler.configured(config)
    steps = run(workload, factory, properties=config.properties())
    return compute_metrics(workload, steps.events), sum(len(e.preempted) for e in steps.events)


@st.composite
def configs(draw: st.DrawFn) -> EngineConfig:
    """A named design, its budget, chunking, batching, order, cache and pool rules redrawn."""
    base = draw(st.sampled_from(list(CONFIGS.values())))
    lesson = base.admission == "peak"
    chunking = "none" if lesson else draw(st.sampled_from(["all", "first", "none"]))
    budget = draw(st.integers(1, 40) if chunking != "none" else st.none() | st.integers(1, 40))
    return replace(
        base,
        token_budget=budget,
        chunking=chunking,
        batching=draw(st.sampled_from(["mixed", "prefill-first"])),
        watermark_pages=draw(st.integers(0, 2)),
        null_page=draw(st.booleans()),
        static=draw(st.booleans()),
        order=draw(st.sampled_from(["fcfs", "fcfs", "fcfs", "priority"])),
        prefix_caching=not lesson and draw(st.booleans()),
    )


@given(workloads(max_requests=10, max_output=20, max_gap=12, swarm=True), configs())
def test_engine_metrics_are_the_stepped_engines(workload: Workload, config: EngineConfig) -> None:
    figures, fast = engine_metrics(workload, config)
    expected, preemptions = stepped(workload, config)
    scope = engine_replay_scope(workload, config)
    event(f"batched replay: {fast}")
    event(
        f"outside: {scope.reason.split(':')[0]}"
        if not scope.covered
        else f"preempts: {preemptions > 0}"
    )
    assert figures == expected
    if fast:
        assert preemptions == 0
        assert engine_replay_scope(workload, config).covered


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("family", ["poisson-short-roomy", "bursty-long-roomy", "scale"])
def test_the_replay_runs_where_the_pool_never_binds(family: str, name: str) -> None:
    workload = generate(family, 60, seed=2)
    config = CONFIGS[name]
    figures, fast = engine_metrics(workload, config)
    assert fast, "the batched replay fell back where it is exact"
    assert figures == stepped(workload, config)[0]


@pytest.mark.parametrize("name", ["vllm-v1", "nano", "nano-classic"])
def test_a_preemption_hands_the_run_to_the_stepped_engine(name: str) -> None:
    workload = generate("bursty-short-tight", 80, seed=1)
    config = CONFIGS[name]
    expected, preemptions = stepped(workload, config)
    assert preemptions, "the workload no longer preempts: pick a tighter one"
    with pytest.raises(Fallback, match="preemption"):
        engine_replay(workload, config)
    assert engine_metrics(workload, config) == (expected, False)


TWO = Limits(batch_limit=2, page_size=4, pool_pages=8)


@pytest.mark.parametrize(
    ("workload", "config", "reason"),
    [
        (  # one page of prefix shared: the second request hits the first's cached page
            Workload(
                "hits",
                TWO,
                (Request("a", 0, 8, 2, "g", 4), Request("b", 1, 8, 2, "g", 4)),
            ),
            CONFIGS["vllm-v1"],
            "prefix caching",
        ),
        (  # the queue is sorted by priority
            Workload("order", TWO, (Request("a", 0, 4, 3), Request("b", 0, 4, 3, priority=-1))),
            replace(CONFIGS["vllm-v1"], order="priority"),
            "admission order",
        ),
        (  # a whole prompt one token over the budget is never admitted
            Workload("whole", TWO, (Request("a", 0, 9, 1),)),
            replace(CONFIGS["nano-classic"], token_budget=8),
            "whole prompt",
        ),
        (  # the largest request needs every page, and page 0 is the null page
            Workload("null", Limits(1, 4, 3), (Request("a", 0, 8, 4),)),
            CONFIGS["vllm-v1"],
            "usable",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_just_outside_the_scope_the_stepped_engine_runs(
    workload: Workload, config: EngineConfig, reason: str
) -> None:
    scope = engine_replay_scope(workload, config)
    assert not scope.covered and reason in scope.reason
    with pytest.raises(OutOfScope):
        engine_replay(workload, config)
    assert engine_metrics(workload, config) == (stepped(workload, config)[0], False)
    # One step inside: without what put it outside, the replay runs and agrees.
    inside = {
        "prefix caching": (replace(config, prefix_caching=False), workload),
        "admission order": (replace(config, order="fcfs"), workload),
        "whole prompt": (replace(config, token_budget=9), workload),
        "usable": (replace(config, null_page=False), workload),
    }[reason]
    assert engine_metrics(inside[1], inside[0]) == (stepped(inside[1], inside[0])[0], True)


def test_a_decode_batch_over_the_budget_falls_back() -> None:
    # Prefill-first admits two, then a third while the two wait: three decoders, a budget of
    # two, and the third waits a turn, which the sums do not model. (Mixed batching admits only
    # on the budget the decoders leave, so its decoders never outnumber the budget.)
    requests = tuple(Request(f"r{i}", i // 2, 1, 5) for i in range(3))
    workload = Workload("starved", Limits(3, 4, 12), requests)
    config = replace(CONFIGS["nano"], token_budget=2)
    with pytest.raises(Fallback, match="budget"):
        engine_replay(workload, config)
    assert engine_metrics(workload, config) == (stepped(workload, config)[0], False)


def test_a_second_chunk_beside_one_with_a_token_left_falls_back() -> None:
    # Prefill-first leaves a's last prompt token to a decode batch, admits b's first chunk in
    # the meantime, and the decode batch of two under a budget of one reaches a only.
    requests = (Request("a", 0, 2, 1), Request("b", 0, 2, 1))
    workload = Workload("two chunks", Limits(2, 2, 2), requests)
    config = replace(CONFIGS["nano"], token_budget=1, chunking="all")
    with pytest.raises(Fallback, match="two chunked"):
        engine_replay(workload, config)
    expected = stepped(workload, config)[0]
    assert expected.iterations == 4
    assert engine_metrics(workload, config) == (expected, False)
