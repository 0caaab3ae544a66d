"""vLLM ending requests early, recorded and checked (spec/eventlog.md 4.9): a stop token through
``check_stop``, an abort through ``finish_requests``. Each log declares ``stops_early``, checks
clean, shows every planned early end where it was planned, and the declaration is shown to
matter. Two slow sweeps (``-m "vllm and slow"``) record early stops over every family, and every
option that changes vLLM's design drawn together. The tests need the vLLM extra (``-m vllm``)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from test_record_vllm import crowded
from test_record_vllm_policies import prioritized, redeclared

from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecordOptions, early_end
from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import Limits, Request, Workload


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


def aborts(workload: Workload, log: Path) -> dict[str, list[str]]:
    """The requests aborted from the queue, mid-prefill and while decoding, by the log."""
    tokens, finished = made(log)
    text = log.read_text()
    where: dict[str, list[str]] = {"queue": [], "prefill": [], "decode": []}
    for r in workload.requests:
        if (early_end(r) or ("",))[0] == "abort" and tokens[r.id] < r.output_tokens:
            assert r.id in finished
            if f'["admit","{r.id}"]' not in text:
                where["queue"].append(r.id)
            else:
                where["prefill" if tokens[r.id] == 0 else "decode"].append(r.id)
    return where


@pytest.mark.vllm
def test_aborts_find_requests_queued_mid_prefill_and_decoding(tmp_path: Path) -> None:
    crowd = crowded(generate("poisson-short-tight", 300, 3), 3, batch_limit=64)
    # Prompts of 400 tokens under a budget of 16, one every 30 iterations: each is admitted at
    # once and takes about 25 iterations to prefill, where aborts find it.
    slow = Workload(
        "slow-prefill",
        Limits(8, 16, 8 * 27 + 1),
        tuple(Request(f"p{i}", 30 * i, 400, 20) for i in range(60)),
    )
    found: dict[str, list[str]] = {}
    for workload, budget in ((crowd, 256), (slow, 16)):
        log = record(workload, tmp_path / f"{workload.name}.jsonl", token_budget=budget)
        checked = check_stream(log, all_findings=True)
        assert checked.finding is None, (checked.finding, checked.later)
        for place, ids in aborts(workload, log).items():
            found.setdefault(place, []).extend(ids)
    assert all(found.values()), found


@pytest.mark.vllm
def test_an_abort_of_the_queues_head_is_not_read_as_batch_3(tmp_path: Path) -> None:
    # Where the sweep found it: r17 waited at the head for pages and was aborted from the queue
    # after iteration 65's schedule; the line's queue showed r18 at its head, which fitted, and
    # BATCH-3 said vLLM had left 52 slots idle (spec/eventlog.md 4.9).
    workload = crowded(generate("poisson-long-tight", 300, 13), 3, batch_limit=64)
    log = record(workload, tmp_path / "run.jsonl", token_budget=8192, chunked_prefill=False)
    assert '["finish","r17"]' in log.read_text()
    assert "r17" in aborts(workload, log)["queue"]
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


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


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("draw", range(40))
def test_vllm_options_drawn_together_check_clean(draw: int, tmp_path: Path) -> None:
    # Every option that changes vLLM's design, drawn together: 32 to 256 slots, budgets from
    # the slot count up, chunking on or off and capped, fcfs or priority, the prefix cache on or
    # off, a watermark, a prefill cadence, early stops. Each log declares what it was recorded
    # under and checks clean.
    rng = random.Random(draw)
    batch = rng.choice([32, 64, 128, 256])
    chunked = rng.random() < 0.8
    workload = crowded(
        generate(rng.choice(sorted(FAMILIES)), rng.choice([200, 400]), rng.randrange(1000)),
        rng.choice([2, 3, 4]),
        batch_limit=batch,
    )
    policy = rng.choice(["fcfs", "priority"])
    if policy == "priority":
        workload = prioritized(workload)
    options = RecordOptions(
        max(batch, rng.choice([256, 512, 2048])) if chunked else 8192,
        policy="priority" if policy == "priority" else "fcfs",
        chunked_prefill=chunked,
        prefill_chunk=rng.choice([0, 0, 16, 64]) if chunked else 0,
        prefix_caching=rng.random() < 0.8,
        prefill_interval=rng.choice([1, 1, 2, 4]),
        watermark=rng.choice([0.0, 0.0, 0.05, 0.2]),
        early_stops=rng.random() < 0.7,
    )
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", workload, log, options)
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (options, checked.finding, checked.later)
