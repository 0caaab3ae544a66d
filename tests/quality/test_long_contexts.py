"""Every check reaches contexts the size of the pool: a block table wrong only past 256 pages is
caught by the default check's fixed runs, not left to luck."""

from __future__ import annotations

from dataclasses import replace

from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.targets.load import SchedulerTarget
from kvsched.reference import ContinuousScheduler
from kvsched.reference.families import LONG_CONTEXTS, check_workloads, long_contexts
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import pages_for

FIXED_ONLY = CheckOptions(hypothesis=False, proof_requests=0)


class TableCutAt256(ContinuousScheduler):
    """Lists at most 256 pages of a request's block table: right for every context but a long
    one (4,096 tokens in pages of 16)."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        tables = {rid: pages[:256] for rid, pages in batch.page_tables.items()}
        return replace(batch, page_tables=tables)


def _most_pages(workloads: object) -> int:
    return max(
        pages_for(r.prompt_tokens + r.output_tokens, w.limits.page_size)
        for w in workloads  # type: ignore[attr-defined]
        for r in w.requests
    )


def test_the_families_and_the_teaching_trace_never_reach_256_pages() -> None:
    assert _most_pages([load_teaching_trace(), *check_workloads()]) < 256
    assert _most_pages([long_contexts()]) == 1024  # the whole usable pool


def test_a_block_table_wrong_past_256_pages_is_caught_on_the_long_contexts() -> None:
    target = SchedulerTarget("cut", TableCutAt256, "continuous", None)
    [verdict] = check_target(target, FIXED_ONLY).verdicts
    assert verdict.finding is not None and verdict.finding.invariant == "PAGE-1"
    assert verdict.counterexample is not None
    assert verdict.counterexample.found_by.startswith(LONG_CONTEXTS)
    assert verdict.evidence.coverage.context == 1024 * 16


def test_a_target_reserving_pages_still_gets_the_whole_usable_pool() -> None:
    workload = long_contexts(reserved=3)
    assert workload.limits.pool_pages == 1024 + 3
    assert _most_pages([workload]) == 1024
