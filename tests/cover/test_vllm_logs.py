"""Logs of vLLM 0.33.0 itself, recorded by ``kvsched record vllm`` from examples/vllm/ and kept
in tests/logs/vllm/: what a randomized search of vLLM's options found. One is a correct run that
LIVE-3 used to call thrash (a false alarm, now not applicable where its proof does not hold), the
other a real vLLM bug kvsched reports: a prefix-cache hit on a block no step ever wrote.

The offline tests need no vLLM; the ``vllm`` ones record each log again and require the same
bytes, so the committed logs are what the pinned vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.judge.eventlog import check_event_log
from kvsched.checks.record.base import RecordOptions
from kvsched.spec.applicability import applicable
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import load_workload

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "logs" / "vllm"
RECORDINGS = {  # log: (workload, how it was recorded)
    "chunk_cap_recompute": (
        "chunk-cap-recompute",
        RecordOptions(token_budget=8, prefill_chunk=1),
    ),
    "stale_prefix_hit": (
        "stale-prefix-hit",
        RecordOptions(token_budget=10, policy="priority", prefill_chunk=8),
    ),
}


def test_recompute_under_a_prefill_chunk_is_not_read_as_thrash(tmp_path: Path) -> None:
    log = LOGS / "chunk_cap_recompute.jsonl"
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None and checked.later == ()
    assert checked.iterations == 133
    rows = {row.invariant: row for row in check_event_log("log", log).invariants}
    assert rows["LIVE-3"].status == "not applicable"
    assert "prefill chunk (1 token) is below the token budget" in rows["LIVE-3"].how
    # The same log without its chunk declared: the rule whose proof needs no cap applies, and
    # reads vLLM's recompute, on its way back to each request's most, as a cycle (and the run
    # outlasts the bound that a budget-sized chunk gives, LIVE-1, first).
    head, *rest = log.read_text().splitlines()
    header = json.loads(head)
    del header["target"]["prefill_chunk"]
    undeclared = tmp_path / "undeclared.jsonl"
    undeclared.write_text("\n".join([json.dumps(header), *rest]) + "\n")
    checked = check_stream(undeclared, all_findings=True)
    found = {f.invariant: f.iteration for f in (checked.finding, *checked.later) if f is not None}
    assert found["LIVE-3"] == 122


def test_a_hit_on_a_block_vllm_cached_but_never_wrote_is_page_6() -> None:
    finding = check_stream(LOGS / "stale_prefix_hit.jsonl", all_findings=True).finding
    assert finding is not None
    assert (finding.invariant, finding.iteration, finding.pages) == ("PAGE-6", 6, (21,))
    assert finding.requests == ("r5",) and "holds no KV yet" in finding.message


@pytest.mark.parametrize(
    ("chunk", "budget", "judged"),
    [(None, 8, True), (8, 8, True), (None, None, True), (1, 8, False), (4, 16, False)],
)
def test_live_3_applies_unless_a_prefill_chunk_is_below_the_budget(
    chunk: int | None, budget: int | None, judged: bool
) -> None:
    declared = TargetProperties(
        admission="lazy",
        token_budget=budget,
        chunked_prefill=chunk is not None,
        prefill_chunk=chunk,
        preemption=True,
    )
    ids = {invariant.id for invariant in applicable("continuous", declared)}
    assert ("LIVE-3" in ids) == judged


@pytest.mark.vllm
@pytest.mark.parametrize("log", sorted(RECORDINGS))
def test_the_pinned_vllm_records_each_log_again(log: str, tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    example, options = RECORDINGS[log]
    workload = load_workload(ROOT / "examples" / "vllm" / f"{example}.json")
    again = tmp_path / "again.jsonl"
    record_log("vllm", workload, again, options)
    assert again.read_bytes() == (LOGS / f"{log}.jsonl").read_bytes()
