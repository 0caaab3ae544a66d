"""Schedulers that work the way real engines do are reported clean, each declaring its design;
a planted bug in each engine feature is caught with the right id."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from engines import orca_like
from engines.shortest_first import ShortestFirst
from engines.vidur_like import VidurLightLLM, VidurSarathi, VidurVLLM
from hypothesis import given

from kvsched.checks.monitor import Monitor, monitor_run
from kvsched.checks.search.strategies import workloads
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.reference.families import generate
from kvsched.spec.events import IterationEvent, fixed_order
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload


def orca(max_model_len: int) -> SchedulerFactory:
    """vidur's Orca: reserves ``max_model_len`` tokens (or the request's own, if more)."""
    factory = orca_like.scheduler(max_model_len)
    factory.properties = orca_like.properties(max_model_len)  # type: ignore[attr-defined]
    return factory


TARGETS: dict[str, SchedulerFactory] = {
    "vllm-v1": EngineScheduler.configured(CONFIGS["vllm-v1"]),
    "nano-vllm chunked": EngineScheduler.configured(CONFIGS["nano"]),
    "nano-vllm classic": EngineScheduler.configured(CONFIGS["nano-classic"]),
    "vidur vllm": VidurVLLM,
    "vidur sarathi": VidurSarathi,
    "vidur lightllm": VidurLightLLM,
    "vidur orca": orca(64),
    "shortest-first": ShortestFirst,
}


def _declared(target: SchedulerFactory) -> TargetProperties:
    properties = getattr(target, "properties", None)
    assert isinstance(properties, TargetProperties)
    return properties


def _finding(workload: Workload, target: SchedulerFactory) -> str | None:
    properties = _declared(target)
    if properties.reserved_pages:  # the pool a target with reserved ids needs (section 1)
        extra = len(properties.reserved_pages)
        limits = replace(workload.limits, pool_pages=workload.limits.pool_pages + extra)
        workload = replace(workload, limits=limits)
    result = run(workload, target, properties.policy, properties=properties)
    assert result.fault is None, result.fault
    finding = monitor_run(result, properties)
    return None if finding is None else str(finding)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_real_engine_designs_are_clean_on_the_teaching_trace_and_families(name: str) -> None:
    target = TARGETS[name]
    for workload in (
        load_teaching_trace(),
        generate("poisson-short-tight", 40, 1),
        generate("bursty-short-tight", 40, 2),
        generate("shared-prefix", 30, 3),
    ):
        assert _finding(workload, target) is None, (name, workload.name)


@pytest.mark.parametrize("name", sorted(TARGETS))
@given(workload=workloads())
def test_real_engine_designs_are_clean_on_hypothesis_workloads(
    name: str, workload: Workload
) -> None:
    # Hypothesis draws pools as small as one request's peak, which a 64-token reservation
    # would not fit: Orca reserves only the request's own peak there.
    target = orca(1) if name == "vidur orca" else TARGETS[name]
    assert _finding(workload, target) is None


def test_shortest_first_is_checked_against_its_own_order() -> None:
    w = Workload("sjf", Limits(1, 4, 8), (Request("long", 0, 9, 2), Request("short", 0, 1, 2)))
    assert _finding(w, ShortestFirst) is None
    fcfs = replace(_declared(ShortestFirst), order="fcfs")
    result = run(w, ShortestFirst, "continuous")
    finding = monitor_run(result, fcfs)
    assert finding is not None and finding.invariant == "BATCH-4"


def _event(n: int, before: dict[str, tuple[int, ...]], **fields: Any) -> IterationEvent:
    base: dict[str, Any] = dict(
        iteration=n, arrived=(), admitted=(), active=(), decoded=(), finished=(),
        page_tables={}, freed={}, free_pages=4, waiting=(), computed={},
    )  # fmt: skip
    released = fields.pop("released", {})
    base.update(fields)
    schedule, gained = fixed_order(
        before,
        base.get("preempted", ()),
        released,
        base["admitted"],
        base["page_tables"],
        {},
    )
    return IterationEvent(**base, allocated=gained, schedule=schedule)


def test_preempted_readmitted_and_finished_in_one_iteration_frees_each_page_once() -> None:
    # vidur's Sarathi: one schedule() preempts 'a', re-admits it, and its recompute completes
    # with its last token. Version 2 keeps the preemption's frees apart from the finish's.
    w = Workload("sarathi", Limits(2, 2, 4), (Request("a", 0, 2, 2),))
    declared = TargetProperties(admission="lazy", preemption=True, token_budget=8)
    first = _event(
        1, {}, arrived=("a",), admitted=("a",), active=("a",), decoded=("a",),
        page_tables={"a": (0,)}, free_pages=3, computed={"a": 2},
    )  # fmt: skip
    again = _event(
        2, {"a": (0,)}, admitted=("a",), active=("a",), decoded=("a",), finished=("a",),
        preempted=("a",), page_tables={"a": (1, 2)}, computed={"a": 3},
        released={"a": (0,)}, freed={"a": (1, 2)}, free_pages=4,
    )  # fmt: skip
    monitor = Monitor(w, "", declared)
    assert monitor.observe(first) is None and monitor.observe(again) is None
    assert monitor.finish(drained=True) is None
    # A version-1 log has one 'freed' list per request, so the finish reads as a double free.
    merged = _event(
        2, {"a": (0,)}, admitted=("a",), active=("a",), decoded=("a",), finished=("a",),
        preempted=("a",), page_tables={"a": (1, 2)}, computed={"a": 3},
        released={"a": (0, 1, 2)}, free_pages=4,
    )  # fmt: skip
    monitor = Monitor(w, "", declared)
    assert monitor.observe(first) is None
    finding = monitor.observe(merged)
    assert finding is not None and finding.invariant == "PAGE-3"


@pytest.mark.parametrize(
    ("name", "undeclared"),
    [
        ("vidur vllm", {"budget": "sum"}),  # a padded budget counted as a sum
        ("vidur lightllm", {"estimate_admission": False}),  # estimate-based admission
        ("nano-vllm chunked", {"chunking": "all"}),  # first-only chunking
    ],
)
def test_without_its_declaration_a_correct_design_reads_as_idling(
    name: str, undeclared: dict[str, object]
) -> None:
    # The declaration is what keeps work conservation from a false alarm on these designs.
    target = TARGETS[name]
    properties = replace(_declared(target), **undeclared)  # type: ignore[arg-type]
    found = set()
    for seed in range(2):
        for family in ("poisson-short-tight", "bursty-short-tight", "shared-prefix"):
            workload = generate(family, 60, seed)
            result = run(workload, target, properties.policy, properties=properties)
            finding = monitor_run(result, properties)
            found |= {finding.invariant} if finding else set()
    assert found == {"BATCH-3"}
