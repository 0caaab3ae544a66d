"""A randomized search of vLLM's options on small workloads: each seed draws a workload of 2 to 16
requests (pages of 1 to 16 tokens, prefix groups, priorities, pools down to the largest request)
and every recorder option at once, records vLLM 0.33.0 over it and requires a clean check. Small
runs reach corners (a pool of one request, a chunk of one token, a request preempted in the
schedule that scheduled it) that grids of large runs pass over; a search of this kind found the
two logs of tests/logs/vllm/. ``-m vllm`` runs 40 seeds; ``-m "vllm and slow"`` runs 6,000.

Priority scheduling with the prefix cache is left out of the draw: there vLLM 0.33.0 can hit a
block it cached but never wrote, a true PAGE-6 (tests/cover/test_vllm_logs.py), which a search for
false alarms cannot tell from one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecordOptions
from kvsched.spec.workload import Limits, Request, Workload, peak_pages


def draw(seed: int) -> tuple[Workload, RecordOptions]:
    """The workload and the options of one seed."""
    rng = random.Random(seed)
    page_size = rng.choice([1, 2, 3, 4, 8, 16])
    groups = rng.choice([0, 1, 2])
    prefixes = [rng.randint(1, 40) for _ in range(groups)]
    requests = []
    for i in range(rng.randint(2, 16)):
        prompt = rng.randint(1, 48)
        group = rng.randrange(groups) if groups and rng.random() < 0.8 else None
        requests.append(
            Request(
                f"r{i}",
                rng.randint(0, 6),
                prompt,
                rng.randint(1, 12),
                prefix_group="" if group is None else f"g{group}",
                prefix_tokens=0 if group is None else min(prefixes[group], prompt),
                priority=rng.randint(0, 2),
            )
        )
    requests.sort(key=lambda r: r.arrival)
    largest = max(peak_pages(r, page_size) for r in requests)
    pool = largest + 1 + rng.choice([0, 0, 1, 2, 4, 8, 32])  # + vLLM's null block
    batch = rng.randint(1, 8)
    workload = Workload(f"search-{seed}", Limits(batch, page_size, pool), tuple(requests))
    longest = max(r.prompt_tokens + r.output_tokens for r in requests)
    chunked = rng.random() < 0.75
    budget = max(batch, rng.choice([1, 4, 8, 12, 16, 32, 64]))
    caching = rng.random() < 0.8
    options = RecordOptions(
        token_budget=budget if chunked else max(budget, longest),
        policy="fcfs" if caching else rng.choice(["fcfs", "priority"]),
        chunked_prefill=chunked,
        prefill_chunk=min(rng.choice([0, 0, 1, 2, 5, 8]), longest) if chunked else 0,
        prefix_caching=caching,
        prefill_interval=rng.choice([1, 1, 2, 3]),
        watermark=rng.choice([0.0, 0.0, 0.1, 0.3]),
        early_stops=rng.random() < 0.4,
    )
    return workload, options


def _search(seeds: range, directory: Path) -> None:
    from kvsched.checks.record.registry import record_log

    for seed in seeds:
        workload, options = draw(seed)
        log = directory / f"search-{seed}.jsonl"
        record_log("vllm", workload, log, options)
        checked = check_stream(log, all_findings=True)
        assert checked.finding is None, (seed, options, checked.finding, checked.later)
        log.unlink()


@pytest.mark.vllm
def test_a_few_seeds_check_clean(tmp_path: Path) -> None:
    _search(range(40), tmp_path)


@pytest.mark.vllm
@pytest.mark.slow
def test_six_thousand_seeds_check_clean(tmp_path: Path) -> None:
    _search(range(6000), tmp_path)


def test_the_draw_covers_every_option() -> None:
    drawn = [draw(seed)[1] for seed in range(300)]
    assert {o.policy for o in drawn} == {"fcfs", "priority"}
    assert not any(o.policy == "priority" and o.prefix_caching for o in drawn)
    for field in ("chunked_prefill", "prefix_caching", "early_stops"):
        assert {getattr(o, field) for o in drawn} == {False, True}, field
    assert {o.prefill_interval for o in drawn} == {1, 2, 3}
    assert {o.watermark for o in drawn} == {0.0, 0.1, 0.3}
    assert {o.prefill_chunk for o in drawn} >= {0, 1, 2, 5, 8}
