"""vLLM's other designs, recorded and checked: priority scheduling, and chunked prefill turned
off. Each log declares the design it was recorded under, checks clean, and the declaration is
shown to matter: the same log declared otherwise is a finding. The tests need the vLLM extra
(``-m vllm``); the slow sweep is ``-m "vllm and slow"``."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from test_record_vllm import EXAMPLES, crowded

from kvsched.checks.eventlog.jsonl import check_log
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecordOptions
from kvsched.cli import main
from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import Workload, load_workload


def prioritized(workload: Workload, levels: int = 3) -> Workload:
    """``workload`` with its requests spread over ``levels`` priority classes (0 first)."""
    requests = tuple(
        dataclasses.replace(r, priority=(i * 7) % levels) for i, r in enumerate(workload.requests)
    )
    return dataclasses.replace(workload, requests=requests)


def lines(log: Path) -> list[str]:
    if log.suffix == ".gz":
        with gzip.open(log, "rt") as text:
            return text.read().splitlines()
    return log.read_text().splitlines()


def redeclared(log: Path, into: Path, **target: object) -> Path:
    """The log at ``log`` with its header's declarations changed by ``target`` (None: drop)."""
    head, *rest = lines(log)
    header = json.loads(head)
    for field, value in target.items():
        if value is None:
            header["target"].pop(field, None)
        else:
            header["target"][field] = value
    into.write_text("\n".join([json.dumps(header), *rest]) + "\n")
    return into


@pytest.mark.vllm
def test_priority_scheduling_checks_clean_and_its_order_is_checked(tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl"
    workload = load_workload(EXAMPLES / "priorities.json")
    record_log("vllm", workload, log, RecordOptions(32, policy="priority"))
    text = log.read_text()
    assert json.loads(text.splitlines()[0])["target"]["order"] == "priority"
    assert '"preempt"' in text
    assert check_log(log) is None
    # vLLM admitted b (priority 1) before a (priority 2), both arriving at time 0: under the
    # default order, first come first served, that is out of order.
    fcfs = check_log(redeclared(log, tmp_path / "fcfs.jsonl", order=None))
    assert fcfs is not None and fcfs.invariant == "BATCH-4", fcfs


@pytest.mark.vllm
@pytest.mark.parametrize("family", ["poisson-short-tight", "bursty-heavy-tight", "scale"])
def test_priority_scheduling_of_generated_workloads_checks_clean(
    family: str, tmp_path: Path
) -> None:
    # Three priority classes, prefix groups and a third of the pool: vLLM preempts the running
    # request of the greatest priority value, wherever it stands in the batch.
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    workload = prioritized(crowded(generate(family, 300, 3), 3, batch_limit=64))
    record_log("vllm", workload, log, RecordOptions(256, policy="priority"))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


@pytest.mark.vllm
@pytest.mark.parametrize("family", ["poisson-long-tight", "bursty-short-tight"])
def test_without_chunked_prefill_every_prompt_is_computed_whole(
    family: str, tmp_path: Path
) -> None:
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    workload = crowded(generate(family, 300, 4), 3, batch_limit=64)
    record_log("vllm", workload, log, RecordOptions(8192, chunked_prefill=False))
    assert json.loads(lines(log)[0])["target"]["chunked_prefill"] is False
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    assert checked.efficiency is not None and checked.efficiency.preemptions > 0


@pytest.mark.vllm
def test_chunked_prefill_off_needs_a_budget_for_the_longest_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vLLM refuses the configuration: invalid input (exit 2), said in its own words.
    out = tmp_path / "run.jsonl"
    args = ["record", "vllm", str(EXAMPLES / "priorities.json"), "-o", str(out)]
    assert main([*args, "--token-budget", "16", "--no-chunked-prefill"]) == 2
    assert "max_num_batched_tokens" in capsys.readouterr().err
    both = ["--no-chunked-prefill", "--policy", "priority"]
    assert main([*args, "--token-budget", "64", *both]) == 0
    assert check_log(out) is None


@pytest.mark.vllm
def test_a_prefill_chunk_below_the_budget_is_declared(tmp_path: Path) -> None:
    # vLLM's long_prefill_token_threshold caps each request's chunk: two long prompts in one
    # slot then take many more iterations than the budget needs. Declared, the log is clean;
    # undeclared, the bound runs out (LIVE-1), as it would for an engine that logged its run
    # without saying so.
    from kvsched.checks.record.registry import record_log
    from kvsched.spec.workload import Limits, Request

    serial = Workload(
        "serial", Limits(1, 16, 200), (Request("a", 0, 1000, 2), Request("b", 0, 900, 2))
    )
    log = tmp_path / "run.jsonl"
    record_log("vllm", serial, log, RecordOptions(512, prefill_chunk=16))
    assert json.loads(lines(log)[0])["target"]["prefill_chunk"] == 16
    assert check_log(log) is None
    found = check_log(redeclared(log, tmp_path / "undeclared.jsonl", prefill_chunk=None))
    assert found is not None and (found.invariant, found.iteration) == ("LIVE-1", 9), found
    off = ["record", "vllm", str(EXAMPLES / "priorities.json"), "-o", str(tmp_path / "x")]
    assert main([*off, "--no-chunked-prefill", "--prefill-chunk", "8"]) == 2


@pytest.mark.vllm
@pytest.mark.parametrize("family", ["poisson-short-tight", "poisson-long-roomy"])
def test_a_watermark_is_declared_as_vllm_counts_it(family: str, tmp_path: Path) -> None:
    # vLLM keeps int(watermark * num_blocks) blocks free when it admits beside a scheduled
    # request. Declared, the log is clean; undeclared, a head left waiting for the watermark
    # reads as an idle slot while it fitted (BATCH-3).
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate(family, 300, 3), 3, batch_limit=64)
    log = tmp_path / "run.jsonl"
    record_log("vllm", workload, log, RecordOptions(256, watermark=0.2))
    declared = json.loads(lines(log)[0])["target"]["watermark_pages"]
    assert declared == int(0.2 * workload.limits.pool_pages) > 0
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    found = check_log(redeclared(log, tmp_path / "undeclared.jsonl", watermark_pages=0))
    assert found is not None and found.invariant == "BATCH-3", found
    args = ["record", "vllm", str(EXAMPLES / "priorities.json"), "-o", str(tmp_path / "x")]
    assert main([*args, "--watermark", "1"]) == 2


@pytest.mark.vllm
def test_without_the_prefix_cache_nothing_is_shared_or_declared_shared(tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate("bursty-heavy-tight", 300, 3), 3, batch_limit=64)
    log = tmp_path / "run.jsonl"
    record_log("vllm", workload, log, RecordOptions(256, prefix_caching=False))
    assert json.loads(lines(log)[0])["target"]["prefix_sharing"] is False
    assert '"share"' not in log.read_text() and '"preempt"' in log.read_text()
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


@pytest.mark.vllm
def test_a_prefill_cadence_is_declared_as_no_work_conservation(tmp_path: Path) -> None:
    # vLLM's prefill_schedule_interval holds prefill until 4 steps have run since the last
    # that carried one: waiting requests wait beside free slots and pages by design. The log
    # declares estimate_admission, under which BATCH-3 is not promised; undeclared, BATCH-3.
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate("poisson-short-tight", 300, 3), 3, batch_limit=64)
    log = tmp_path / "run.jsonl"
    record_log("vllm", workload, log, RecordOptions(256, prefill_interval=4))
    assert json.loads(lines(log)[0])["target"]["estimate_admission"] is True
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    found = check_log(redeclared(log, tmp_path / "undeclared.jsonl", estimate_admission=None))
    assert found is not None and found.invariant == "BATCH-3", found
    args = ["record", "vllm", str(EXAMPLES / "priorities.json"), "-o", str(tmp_path / "x")]
    assert main([*args, "--prefill-interval", "0"]) == 2


SWEEP = [  # (requests, batch limit, pool divided by, token budget, seed, policy, chunked)
    (300, 64, 3, 256, 5, "priority", True),
    (600, 128, 2, 512, 6, "priority", True),
    (300, 64, 3, 8192, 7, "fcfs", False),
    (300, 64, 3, 8192, 8, "priority", False),
]
WATERMARKS = (0.0, 0.05, 0.2)  # the sweep's runs take them in turn
INTERVALS = (1, 1, 3)  # and these prefill cadences


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize(("size", "batch", "shrink", "budget", "seed", "policy", "chunked"), SWEEP)
def test_vllm_policies_sweep_checks_clean(
    family: str,
    size: int,
    batch: int,
    shrink: int,
    budget: int,
    seed: int,
    policy: str,
    chunked: bool,
    tmp_path: Path,
) -> None:
    from kvsched.checks.record.registry import record_log

    workload = crowded(generate(family, size, seed), shrink, batch_limit=batch)
    if policy == "priority":
        workload = prioritized(workload)
    log = tmp_path / "run.jsonl.gz"
    turn = seed + len(family)
    options = RecordOptions(
        budget,
        policy="priority" if policy == "priority" else "fcfs",
        watermark=WATERMARKS[turn % len(WATERMARKS)],
        prefill_interval=INTERVALS[turn // 3 % len(INTERVALS)],
    )
    record_log("vllm", workload, log, dataclasses.replace(options, chunked_prefill=chunked))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
