"""Public trace layouts read into workloads (docs/traces.md): each self-made sample in
tests/traces/ imports, replays and checks clean with the reference, and each rule does what the
docs say."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.monitor import monitor_run
from kvsched.reference import POLICIES
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.reference.traces import ImportOptions, TraceError, import_trace
from kvsched.spec.workload import Limits, Workload

TRACES = Path(__file__).resolve().parents[1] / "traces"
SMALL = Limits(batch_limit=4, page_size=16, pool_pages=300)
"""Limits under which the samples queue and the pool binds."""
SAMPLES = [
    ("azure", "azure_2023.csv", {}),
    ("azure", "azure_2024.csv", {}),
    ("burstgpt", "burstgpt.csv", {}),
    ("burstgpt", "burstgpt_extra_columns.csv", {}),
    ("mooncake", "mooncake.jsonl", {}),
    ("vidur", "vidur.csv", {}),
    ("vidur", "vidur_lengths.csv", {"poisson": Decimal(4)}),
]


def _import(layout: str, name: str, **options: Any) -> Workload:
    workload, _ = import_trace(layout, TRACES / name, ImportOptions(**options))
    return workload


@pytest.mark.parametrize(("layout", "name", "options"), SAMPLES)
def test_each_sample_imports_replays_and_checks_clean(
    layout: str, name: str, options: dict[str, object]
) -> None:
    workload = _import(layout, name, limits=SMALL, **options)
    assert len(workload.requests) >= 2
    for policy, scheduler in POLICIES.items():
        result = run(workload, scheduler, policy)
        assert result.drained and result.fault is None
        finding = monitor_run(result)
        assert finding is None, str(finding)
    vllm = CONFIGS["vllm-v1"]
    result = run(workload, EngineScheduler.configured(vllm), properties=vllm.properties())
    assert result.drained
    assert monitor_run(result, vllm.properties()) is None


def test_azure_times_are_rebased_exactly_and_failed_rows_dropped() -> None:
    workload, report = import_trace("azure", TRACES / "azure_2023.csv")
    # 18:20:11.0412700 is 0; 18:20:12.7004400 is 1.6591700 s later: iteration 33 at 0.05 s.
    assert [r.arrival for r in workload.requests] == [0, 5, 33, 59, 59, 90, 123, 137, 167]
    assert "L5" not in {r.id for r in workload.requests}  # 0 generated tokens
    assert (report.failed, report.failed_lines) == (1, (5,))


def test_the_seventh_fractional_digit_counts(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,5,1\n2023-11-16 18:17:03.9799603,5,1\n"
    )
    workload, _ = import_trace("azure", trace, ImportOptions(arrival_scale=Decimal("1e-7")))
    assert [r.arrival for r in workload.requests] == [0, 3]


def test_azure_2024_mixes_times_with_and_without_fractions_across_midnight() -> None:
    workload = _import("azure", "azure_2024.csv")
    # 00:00:00 (line 5) comes before 00:00:00.0000010 (line 4): rows are ordered by time.
    assert [r.id for r in workload.requests] == ["L2", "L3", "L5", "L4", "L6", "L7"]
    assert [r.arrival for r in workload.requests] == [0, 2, 22, 22, 52, 82]


def test_burstgpt_drops_failed_responses_and_keeps_an_empty_prompt() -> None:
    workload, report = import_trace("burstgpt", TRACES / "burstgpt.csv")
    assert report.failed_lines == (3, 6)
    assert [r.arrival for r in workload.requests] == [0, 40, 100, 160, 280, 300, 460, 480]
    assert workload.request("L9").prompt_tokens == 0


def test_rate_and_arrival_scale_rescale_time() -> None:
    once = _import("burstgpt", "burstgpt.csv", arrival_scale=Decimal(1))
    base = [r.arrival for r in once.requests]
    twice = _import("burstgpt", "burstgpt.csv", arrival_scale=Decimal(1), rate=Decimal(2))
    assert base == [0, 2, 5, 8, 14, 15, 23, 24]
    assert [r.arrival for r in twice.requests] == [t // 2 for t in base]


def test_clipping_cuts_the_output_to_the_limit_then_the_prompt_from_its_end() -> None:
    workload, report = import_trace(
        "burstgpt", TRACES / "burstgpt.csv", ImportOptions(max_model_len=300)
    )
    assert all(r.prompt_tokens + r.output_tokens <= 300 for r in workload.requests)
    assert (workload.request("L7").prompt_tokens, workload.request("L7").output_tokens) == (0, 300)
    assert workload.request("L4").prompt_tokens == 35  # 35 + 260 fits: untouched
    assert workload.request("L10").prompt_tokens == 300 - 99
    # L2, L5, L7, L8, L10 and L11 lose 290 + 355 + 88 + 1212 + 3132 + 200 prompt tokens.
    assert (report.clipped, report.clipped_prompt, report.clipped_output) == (6, 5277, 102)


def test_mooncake_rows_are_sorted_and_selected_earliest_first() -> None:
    workload, report = import_trace(
        "mooncake", TRACES / "mooncake.jsonl", ImportOptions(max_requests=3)
    )
    assert [r.id for r in workload.requests] == ["L1", "L3", "L2"]
    assert (report.beyond, report.failed) == (6, 1)


def _hashes(path: Path) -> dict[str, list[int]]:
    import json

    lines = path.read_text().splitlines()
    return {f"L{n}": json.loads(text)["hash_ids"] for n, text in enumerate(lines, 1)}


def test_mooncake_prefix_groups_claim_only_blocks_the_trace_shares() -> None:
    workload = _import("mooncake", "mooncake.jsonl")
    hashes = _hashes(TRACES / "mooncake.jsonl")
    grouped = [r for r in workload.requests if r.prefix_group]
    assert len({r.prefix_group for r in grouped}) >= 2
    for a in grouped:
        for b in grouped:
            if a.id < b.id and a.prefix_group == b.prefix_group:
                common = 0
                while hashes[a.id][common : common + 1] == hashes[b.id][common : common + 1] != []:
                    common += 1
                assert min(a.prefix_tokens, b.prefix_tokens) <= 512 * common
    vllm = CONFIGS["vllm-v1"]
    result = run(workload, EngineScheduler.configured(vllm), properties=vllm.properties())
    assert sum(sum(e.cached.values()) for e in result.events) > 0  # the cache really hits


def test_lengths_only_files_take_seeded_poisson_arrivals() -> None:
    with pytest.raises(TraceError, match="line 1: the header has no column 'arrived_at'"):
        _import("vidur", "vidur_lengths.csv")
    first = _import("vidur", "vidur_lengths.csv", poisson=Decimal(2), seed=1)
    again = _import("vidur", "vidur_lengths.csv", poisson=Decimal(2), seed=1)
    other = _import("vidur", "vidur_lengths.csv", poisson=Decimal(2), seed=2)
    assert first == again and first.requests != other.requests
    assert [r.id for r in first.requests] == [f"L{n}" for n in range(2, 8)]  # file order


def test_vidur_reads_float_reprs_of_seconds() -> None:
    workload = _import("vidur", "vidur.csv")
    assert [r.arrival for r in workload.requests] == [0, 8, 18, 24, 24, 57, 60, 90]
