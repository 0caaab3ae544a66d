"""vLLM ending requests early, recorded and checked (spec/eventlog.md 4.9): a stop token through
``check_stop``, an abort through ``finish_requests``. Each log declares ``stops_early``, checks
clean, shows every planned early end where it was planned, and the declaration is shown to
matter. The tests need the vLLM extra (``-m vllm``); the slow sweep is ``-m "vllm and slow"``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from test_record_vllm import crowded
from test_record_vllm_policies import redeclared

from kvsched.checks.eventlog.check import check_stream
from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.record.base import RecordOptions, early_end
from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import Workload


def made(log: Path) -> tuple[Counter[str], set[str]]:
    """The output tokens each request produced in the log, and the requests it finished."""
    run, _ = read_run(log)
    tokens: Counter[str] = Counter()
    finished: set[str] = set()
    for event in run.events:
        tokens.update(event.decoded)
        finished.update(event.finished)
    return tokens, finished


def record(workload: Workload, log: Path, **options: object) -> Path:
    from kvsched.checks.record.registry import record_log

    record_log("vllm", workload, log, RecordOptions(early_stops=True, **options))  # type: ignore[arg-type]
    return log


@pytest.mark.vllm
def test_vllm_stops_and_aborts_where_planned_and_checks_clean(tmp_path: Path) -> None:
    workload = crowded(generate("poisson-short-tight", 300, 3), 3, batch_limit=64)
    log = record(workload, tmp_path / "run.jsonl", token_budget=256)
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    assert checked.header.properties.stops_early
    tokens, finished = made(log)
    assert finished == {r.id for r in workload.requests}
    kinds: Counter[str] = Counter()
    for request in workload.requests:
        end = early_end(request)
        if end is None:
            assert tokens[request.id] == request.output_tokens, request
        elif end[0] == "stop":
            assert tokens[request.id] == end[1], (request, end)  # the stop token is the last
            kinds["stop"] += 1
        else:  # aborted unless it finished first
            assert tokens[request.id] <= request.output_tokens, (request, end)
            kinds["abort"] += tokens[request.id] < request.output_tokens
    assert kinds["stop"] > 50 and kinds["abort"] > 20, kinds
    assert '"preempt"' in log.read_text()
    undeclared = check_log(redeclared(log, tmp_path / "undeclared.jsonl", stops_early=None))
    assert undeclared is not None and undeclared.invariant == "REQ-2", undeclared
    assert "declares stops_early" in undeclared.message


@pytest.mark.vllm
def test_an_abort_mid_prefill_checks_clean(tmp_path: Path) -> None:
    # A budget of 16 chunks every prompt longer than that: an abort one iteration after the
    # first admission hits such a request before its first token.
    workload = crowded(generate("poisson-long-roomy", 200, 5), 2, batch_limit=16)
    log = record(workload, tmp_path / "run.jsonl.gz", token_budget=16)
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    tokens, finished = made(log)
    silent = [
        r.id
        for r in workload.requests
        if early_end(r) == ("abort", 1) and r.prompt_tokens > 16 and tokens[r.id] == 0
    ]
    assert silent and set(silent) <= finished


SWEEP = [  # (requests, slots, shrink, budget, seed, chunked)
    (400, 128, 3, 512, 11, True),
    (400, 256, 4, 2048, 12, True),
    (300, 64, 3, 8192, 13, False),
]


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize(("size", "batch", "shrink", "budget", "seed", "chunked"), SWEEP)
def test_vllm_early_stops_sweep_checks_clean(
    family: str,
    size: int,
    batch: int,
    shrink: int,
    budget: int,
    seed: int,
    chunked: bool,
    tmp_path: Path,
) -> None:
    workload = crowded(generate(family, size, seed), shrink, batch_limit=batch)
    log = record(workload, tmp_path / "run.jsonl.gz", token_budget=budget, chunked_prefill=chunked)
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
