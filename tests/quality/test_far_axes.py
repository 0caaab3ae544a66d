"""The search reaches the far end of every axis of a workload (checks/search/strategies.py,
``AXES``) on the ci profile, and a bug that lives only there is found and shrunk by it.

Reach is read two ways: from the draws of the ci profile's strategies, in the share a search
draws them (one far workload in ``FAR_SHARE``), for every axis; and from Hypothesis's statistics
(its ``event`` calls, read back through the observability callbacks) of one real ci search, for
the long block tables and whole-pool prompts the far share exists for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.internal.observability import with_observability_callback

from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.search.corners import LONG_CONTEXT_PAGES
from kvsched.checks.search.explore import search
from kvsched.checks.search.strategies import AXES, FAR_SHARE, far_workloads, search_workloads
from kvsched.checks.targets.load import SchedulerTarget
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine_scheduler import VLLMV1Scheduler
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Workload, pages_for, peak_pages

SAMPLE = 200
"""Workloads drawn from the ci profile's strategies, one in ``FAR_SHARE`` of them far."""

REACHED = 0.75
"""The share of an axis's far end that some draw of the sample must reach."""

REACH: dict[str, Callable[[Workload], int]] = {
    "id": lambda w: len(w.requests),
    "arrival": lambda w: max(r.arrival for r in w.requests),
    "prompt_tokens": lambda w: max(
        pages_for(r.prompt_tokens, w.limits.page_size) for r in w.requests
    ),
    "output_tokens": lambda w: max(r.output_tokens for r in w.requests),
    "prefix_group": lambda w: len({r.prefix_group for r in w.requests if r.prefix_group}),
    "prefix_tokens": lambda w: max(
        pages_for(r.prefix_tokens, w.limits.page_size) for r in w.requests
    ),
    "priority": lambda w: max(abs(r.priority) for r in w.requests),
    "batch_limit": lambda w: w.limits.batch_limit,
    "page_size": lambda w: w.limits.page_size,
    "pool_pages": lambda w: w.limits.pool_pages,
}
"""How far a workload goes along each axis, in the axis's unit."""


def _sample(strategy: st.SearchStrategy[Workload], count: int) -> list[Workload]:
    drawn: list[Workload] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate])
    @given(strategy)
    def collect(workload: Workload) -> None:
        drawn.append(workload)

    collect()
    return drawn


# One worker runs this whole module (tests/conftest.py, WHOLE_MODULES): its searches run once.
@pytest.fixture(scope="module")
def ci_draws() -> list[Workload]:
    far = SAMPLE // FAR_SHARE
    return _sample(search_workloads("ci"), SAMPLE - far) + _sample(far_workloads("ci"), far)


def test_every_axis_has_a_measure_of_reach() -> None:
    assert set(REACH) == set(AXES)


@pytest.mark.parametrize("name", sorted(AXES))
def test_the_ci_draws_reach_the_far_end_of_each_axis(name: str, ci_draws: list[Workload]) -> None:
    far = AXES[name].far_end("ci")
    furthest = max(REACH[name](w) for w in ci_draws)
    assert furthest >= REACHED * far, f"{name}: {furthest} of a far end of {far}"


def test_the_ci_draws_hold_whole_pool_prompts_of_hundreds_of_pages(
    ci_draws: list[Workload],
) -> None:
    def whole_pool(w: Workload) -> bool:
        pool = w.limits.pool_pages
        return pool >= LONG_CONTEXT_PAGES and any(
            pages_for(r.prompt_tokens, w.limits.page_size) >= 0.9 * pool for r in w.requests
        )

    assert sum(map(whole_pool, ci_draws)) >= 3
    # ... beside the small ones Hypothesis shrinks well, which stay the most of the draws
    small = [w for w in ci_draws if w.limits.pool_pages <= AXES["pool_pages"].small]
    assert len(small) >= SAMPLE // 4


@pytest.fixture(scope="module")
def statistics() -> Counter[str]:
    """The ``event`` counts of one ci search of vLLM's scheduler, over its generated examples."""
    counts: Counter[str] = Counter()

    def count(observation: Any) -> None:
        generated = getattr(observation, "how_generated", "explicit example")
        if getattr(observation, "type", "") == "test_case" and generated != "explicit example":
            counts.update(list(observation.features))

    with with_observability_callback(count):
        result = search(VLLMV1Scheduler, "continuous", "ci", properties=VLLMV1Scheduler.properties)
    assert result.clean and result.examples == 100
    return counts


def test_the_ci_search_draws_its_far_share_of_long_block_tables(statistics: Counter[str]) -> None:
    far = (100 - 3) // FAR_SHARE  # 3 boundary shapes come first, as explicit examples
    assert statistics[f"a block table of {LONG_CONTEXT_PAGES}+ pages"] >= far
    assert statistics["a prompt of the whole of a long pool"] >= 1


class TableCutAt(ContinuousScheduler):
    """Lists at most ``LAST`` pages of a request's block table: right for every context shorter
    than that, wrong for every longer one."""

    LAST = 256

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        tables = {rid: pages[: self.LAST] for rid, pages in batch.page_tables.items()}
        return replace(batch, page_tables=tables)


class TableCutAt1024(TableCutAt):
    LAST = 1024


@pytest.mark.parametrize("target", [TableCutAt, TableCutAt1024], ids=["256", "1024"])
def test_the_search_alone_finds_a_table_wrong_past_its_pages_and_shrinks_it(
    target: type[TableCutAt],
) -> None:
    # 1,024 pages is past the fixed long-context workload of every check: the far share alone.
    found = search(target, "continuous", "ci").counterexample
    assert found is not None and found.finding.invariant == "PAGE-1"
    [request] = found.workload.requests
    assert peak_pages(request, found.workload.limits.page_size) == target.LAST + 1
    assert found.workload.limits.pool_pages == target.LAST + 1


def test_the_default_check_fails_a_table_wrong_past_256_pages_on_one_request() -> None:
    target = SchedulerTarget("cut", TableCutAt, "continuous", None)
    [verdict] = check_target(target, CheckOptions(proof_requests=0)).verdicts
    assert verdict.finding is not None and verdict.finding.invariant == "PAGE-1"
    assert verdict.counterexample is not None
    assert len(verdict.counterexample.workload.requests) == 1


def test_a_failure_of_the_far_share_replays_from_its_reproduce_line() -> None:
    found = search(TableCutAt, "continuous", "ci").counterexample
    assert found is not None and found.reproduce
    # The line does not say which share drew it: each share replays it, and the far one fails.
    again = search(TableCutAt, "continuous", "ci", reproduce=found.reproduce).counterexample
    assert again is not None
    assert (again.workload.limits, again.workload.requests) == (
        found.workload.limits,
        found.workload.requests,
    )
    assert search(ContinuousScheduler, "continuous", "ci", reproduce=found.reproduce).clean
