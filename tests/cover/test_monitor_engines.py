"""The monitor on real-engine behaviour (spec/eventlog.md section 4), with simulated engines.

The simulated vLLM-v1-like, nano-vllm-like and Orca-style engines of tests/engines must check
clean where they are right, on many workloads, and each planted bug must be flagged with its id
and nothing else. A declaration is what makes engine behaviour legitimate: the same run checked
without it is flagged.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from engines import nano_like, orca_like, vllm_like
from engines.blocks import make_event
from engines.recorded_logs import SCENARIOS, VLLM, VLLM_PREFIXES
from relowered import relowered

from kvsched.checks.monitor.runtime import monitor_run
from kvsched.reference import run
from kvsched.reference.engine import Run
from kvsched.spec.properties import (
    PropertiesError,
    TargetProperties,
    parse_properties,
    properties_to_json,
)
from kvsched.spec.workload import Limits, Request, Workload


def random_workload(rng: random.Random, page_size: int, spare: int) -> Workload:
    requests = tuple(
        Request(f"r{i}", rng.randint(0, 8), rng.randint(1, 24), rng.randint(1, 8))
        for i in range(rng.randint(1, 7))
    )
    peak = max(math.ceil((r.prompt_tokens + r.output_tokens) / page_size) for r in requests)
    limits = Limits(rng.randint(1, 4), page_size, peak + rng.randint(0, peak) + spare)
    return Workload("random", limits, requests)


def vllm_cases(count: int, seed: int) -> list[tuple[Workload, int, dict[str, tuple[str, int]]]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        w = random_workload(rng, rng.choice([1, 2, 4, 8]), spare=1)  # + the null block
        prefixes = {
            r.id: (rng.choice("xy"), min(r.prompt_tokens, rng.choice([4, 8, 16])))
            for r in w.requests if rng.random() < 0.6
        }  # fmt: skip
        cases.append((w, rng.randint(1, 16), prefixes))
    return cases


def test_vllm_like_checks_clean_and_exercises_every_extension() -> None:
    seen: Counter[str] = Counter()
    for w, budget, prefixes in vllm_cases(250, seed=1):
        result = vllm_like.simulate(w, budget, prefixes)
        assert result.drained
        assert monitor_run(result, vllm_like.properties(budget)) is None, (w, budget, prefixes)
        for e in result.events:
            computed = e.computed or {}
            seen["preempted"] += bool(e.preempted)
            seen["prefix hit"] += bool(e.cached)
            seen["page shared by two"] += e.pages_in_use < sum(map(len, e.page_tables.values()))
            seen["chunk without a token"] += any(
                k and r not in e.decoded for r, k in computed.items()
            )
            seen["mixed"] += any(k > 1 for k in computed.values()) and any(
                computed.get(r) == 1 for r in e.decoded
            )
    assert all(seen[k] for k in (
        "preempted", "prefix hit", "page shared by two", "chunk without a token", "mixed",
    )), seen  # fmt: skip


def test_a_running_request_may_sit_out_an_iteration() -> None:
    # A budget of one token: a and b take turns; the one that waits computes and decodes nothing.
    w = Workload("turns", Limits(2, 4, 4), (Request("a", 0, 1, 2), Request("b", 0, 1, 2)))
    a, b = {"a": (0,)}, {"b": (1,)}
    turns = [  # (admitted, active, computes, tables, finished)
        (("a",), ("a",), "a", a, ()),
        (("b",), ("a", "b"), "b", {**a, **b}, ()),
        ((), ("a", "b"), "a", {**a, **b}, ("a",)),
        ((), ("b",), "b", b, ("b",)),
    ]
    events: list[Any] = []
    before: dict[str, tuple[int, ...]] = {}
    for n, (admitted, active, computes, tables, finished) in enumerate(turns, start=1):
        freed = {rid: tables[rid] for rid in finished}
        free = 4 - sum(len(t) for rid, t in tables.items() if rid not in finished)
        events.append(make_event(
            n, arrived=("a", "b") if n == 1 else (), admitted=admitted, active=active,
            decoded=(computes,), finished=finished, tables=tables, before=before, freed=freed,
            free_pages=free, waiting=("b",) if n == 1 else (), computed={computes: 1},
        ))  # fmt: skip
        before = {rid: t for rid, t in tables.items() if rid not in finished}
    properties = TargetProperties(policy="continuous", admission="lazy", token_budget=1)
    result = Run(w, "continuous", tuple(events))
    assert monitor_run(result, properties) is None
    # Without 'computed' the lesson model holds: every active request decodes (3.4).
    lesson = replace(result, events=tuple(replace(e, computed=None) for e in events))
    finding = monitor_run(lesson, replace(properties, token_budget=2))  # prompt + 1 token fits
    assert finding is not None and (finding.invariant, finding.iteration) == ("DEC-1", 2)
    # And under the lesson's peak admission, b should have joined at once (3.2).
    finding = monitor_run(result, replace(properties, admission="peak", token_budget=None))
    assert finding is not None and (finding.invariant, finding.iteration) == ("BATCH-3", 1)


def test_nano_like_checks_clean_with_prefill_or_decode_iterations() -> None:
    rng = random.Random(2)
    seen: Counter[str] = Counter()
    for _ in range(250):
        w = random_workload(rng, rng.choice([1, 2, 4]), spare=0)
        budget = max(r.prompt_tokens + r.output_tokens for r in w.requests) + rng.randint(0, 20)
        result = nano_like.simulate(w, budget)
        assert result.drained
        assert monitor_run(result, nano_like.properties(budget)) is None, (w, budget)
        for e in result.events:
            prefill = bool(e.admitted)
            seen["prefill"] += prefill
            seen["decode"] += not prefill and bool(e.decoded)
            seen["preempted"] += bool(e.preempted)
            seen["recompute"] += any(
                (e.computed or {}).get(r, 0) > w.request(r).prompt_tokens for r in e.admitted
            )
    assert all(seen[k] for k in ("prefill", "decode", "preempted", "recompute")), seen


def test_orca_like_checks_clean_under_the_reference_engine() -> None:
    rng = random.Random(3)
    checked = 0
    for _ in range(200):
        w = random_workload(rng, rng.choice([1, 2, 4]), spare=0)
        reserve = rng.randint(1, w.limits.pool_pages * w.limits.page_size)
        if (
            max(
                orca_like.properties(reserve).reservation(r, w.limits.page_size) for r in w.requests
            )
            > w.limits.pool_pages
        ):
            continue  # a reservation larger than the pool could never be admitted
        result = run(w, orca_like.scheduler(reserve))
        assert monitor_run(result, orca_like.properties(reserve)) is None, (w, reserve)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("bug", sorted(vllm_like.BUGS))
def test_vllm_like_bugs_are_flagged_with_their_id_only(bug: str) -> None:
    expected = vllm_like.BUGS[bug]
    flagged = 0
    for w, budget, prefixes in vllm_cases(120, seed=4):
        result = vllm_like.simulate(w, budget, prefixes, bugs=[bug])
        finding = monitor_run(result, vllm_like.properties(budget))
        if finding is not None:
            assert finding.invariant == expected, (w, budget, prefixes, finding)
            flagged += 1
    assert flagged  # the bug shows on some workloads, and only ever as its own id


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_each_recorded_scenario_has_its_verdict(scenario: Any) -> None:
    result, properties = scenario.record()
    finding = monitor_run(result, properties)
    assert (finding.invariant if finding else None) == scenario.expected


def vllm_clean() -> tuple[Run, TargetProperties]:
    return vllm_like.simulate(VLLM, 8, VLLM_PREFIXES), vllm_like.properties(8)


@pytest.mark.parametrize(
    ("undeclared", "invariant"),
    [
        ({"preemption": False}, "REQ-2"),  # leaving the batch without finishing
        ({"prefix_sharing": False}, "PAGE-2"),  # a second owner of a page
        ({"reserved_pages": ()}, "PAGE-3"),  # the free count misses block 0
        ({"token_budget": 4, "chunked_prefill": True}, "BATCH-1"),  # a chunk of 8 tokens
        ({"admission": "peak"}, "PAGE-5"),  # the batch's peaks overcommit the pool
    ],
)
def test_a_declaration_is_what_makes_engine_behaviour_legitimate(
    undeclared: dict[str, Any], invariant: str
) -> None:
    result, properties = vllm_clean()
    assert monitor_run(result, properties) is None
    finding = monitor_run(result, replace(properties, **undeclared))
    assert finding is not None and finding.invariant == invariant, finding


def test_a_stranded_head_is_flagged_when_the_budget_left_just_fits() -> None:
    # One chunked token of budget and one usable page: strict_fit wants a page to spare.
    w = Workload("tight", Limits(2, 4, 2), (Request("a", 0, 3, 1),))
    finding = monitor_run(vllm_like.simulate(w, 1, bugs=["strict_fit"]), vllm_like.properties(1))
    assert finding is not None and (finding.invariant, finding.iteration) == ("BATCH-3", 1)
    assert monitor_run(vllm_like.simulate(w, 1), vllm_like.properties(1)) is None


def test_reserve_ahead_must_be_declared_and_bounds_the_reservation() -> None:
    w = Workload("orca", Limits(2, 4, 9), (Request("a", 0, 5, 3), Request("b", 1, 2, 2)))
    result = run(w, orca_like.scheduler(16))
    assert monitor_run(result, orca_like.properties(16)) is None
    # Undeclared, 4 pages for 6 tokens are not minimal; declared for 12 tokens, they overrun.
    for properties in (TargetProperties(policy="continuous"), orca_like.properties(12)):
        finding = monitor_run(result, properties)
        assert finding is not None and finding.invariant == "PAGE-1", finding


def test_a_reserved_page_id_in_a_table_is_page_5() -> None:
    w = Workload("nano", Limits(2, 4, 6), (Request("a", 0, 3, 2),))
    result = nano_like.simulate(w, 16)
    assert result.events[0].page_tables["a"] == (0,)
    finding = monitor_run(result, replace(nano_like.properties(16), reserved_pages=(0,)))
    assert finding is not None and (finding.invariant, finding.pages) == ("PAGE-5", (0,))


def corrupt_vllm(iteration: int, **changes: Any) -> Any:
    result, properties = vllm_clean()
    events = list(result.events)
    events[iteration - 1] = replace(events[iteration - 1], **changes)
    return monitor_run(replace(result, events=relowered(events)), properties)


def test_a_token_from_a_partial_prefill_is_dec_3() -> None:
    first = vllm_clean()[0].events[0]  # c computes 8 of its 12 prompt tokens
    assert first.computed == {"c": 8} and not first.decoded
    finding = corrupt_vllm(1, decoded=("c",))
    assert finding is not None and (finding.invariant, finding.requests) == ("DEC-3", ("c",))


def test_kv_for_tokens_that_do_not_exist_is_dec_1() -> None:
    second = vllm_clean()[0].events[1]
    assert second.computed is not None and second.computed["c"] == 4
    finding = corrupt_vllm(2, computed={**second.computed, "c": 6})
    assert finding is not None and (finding.invariant, finding.requests) == ("DEC-1", ("c",))


def test_only_the_batch_is_preempted_computes_or_decodes_once() -> None:
    cases: list[tuple[int, dict[str, Any], str, tuple[str, ...]]] = [
        (1, {"preempted": ("d",)}, "REQ-2", ("d",)),  # d waits: it has nothing to preempt
        (1, {"computed": {"c": 7, "d": 1}}, "DEC-2", ("d",)),
        (2, {"decoded": ("c", "c")}, "DEC-1", ("c",)),
    ]
    for iteration, changes, invariant, requests in cases:
        finding = corrupt_vllm(iteration, **changes)
        assert finding is not None and finding.iteration == iteration, changes
        assert (finding.invariant, finding.requests) == (invariant, requests), finding


def test_a_preempted_request_keeping_pages_is_page_4() -> None:
    third = vllm_clean()[0].events[2]
    assert third.preempted == ("d",)
    freed = {**third.freed, "d": ()}
    finding = corrupt_vllm(3, freed=freed)
    assert finding is not None and (finding.invariant, finding.requests) == ("PAGE-4", ("d",))


def test_a_livelock_that_computes_nothing_is_live_1() -> None:
    # After iteration 2 the engine stops computing and idles: no allowance postpones the bound.
    result, properties = vllm_clean()
    idle = [
        replace(result.events[1], iteration=n, arrived=(), admitted=(), decoded=(), computed={},
                allocated={}, cached={}, shared={})
        for n in range(3, 40)
    ]  # fmt: skip
    events = relowered((*result.events[:2], *idle))
    finding = monitor_run(replace(result, events=events), properties)
    # The bound: last arrival 3, plus output and ceil(prompt / 8) prefill iterations per request.
    bound = 3 + (2 + 1) + (4 + 1) + (2 + 2) + (5 + 2)
    assert finding is not None
    assert (finding.invariant, finding.iteration) == ("LIVE-1", bound + 1)
    assert finding.requests == ("a", "b", "c", "d")


def test_properties_round_trip_and_reject_bad_declarations() -> None:
    for properties in (TargetProperties(), vllm_like.properties(8), orca_like.properties(16)):
        assert parse_properties(properties_to_json(properties)) == properties
    assert TargetProperties(policy="static").lesson_model
    assert not vllm_like.properties(8).lesson_model
    bad: list[dict[str, Any]] = [
        {"admission": "eager"}, {"chunked_prefill": True}, {"token_budget": 0},
        {"max_model_len": 8}, {"reserved_pages": [0, 0]}, {"preemption": 1}, {"colour": "red"},
        {"watermark_pages": -1}, {"policy": 3}, {"reserved_pages": 0},
    ]  # fmt: skip
    for document in bad:
        with pytest.raises(PropertiesError, match=next(iter(document))):
            parse_properties(document)
    with pytest.raises(PropertiesError, match="JSON object"):
        parse_properties(["continuous"])
    with pytest.raises(PropertiesError, match="reserved_pages"):
        TargetProperties(reserved_pages=[0])  # type: ignore[arg-type]
