"""``kvsched record sglang``: SGLang's own scheduling pieces, driven on CPU, write logs that check
clean, and bugs planted in SGLang's own classes from outside are caught by the right rule.

The recording tests need the extra (extras/sglang-cpu.txt and ``sglang`` without its
dependencies) and are marked ``sglang``: CI runs them in a step of their own after installing it.
Without SGLang, the command exits 2 naming the install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecorderError, RecordOptions
from kvsched.cli import main
from kvsched.reference.families import generate
from kvsched.spec.workload import load_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sglang"
HAVE_SGLANG = importlib.util.find_spec("sglang") is not None
TIGHT_RATIO = "0.1"
"""SGLang's own ``SGLANG_INIT_NEW_TOKEN_RATIO``: admission then expects a tenth of each running
request's remaining output (the default, 0.7, decays to that only over hundreds of steps), so a
short run over-admits and retracts."""


def needs_sglang(test: Any) -> Any:
    """Marked ``sglang`` (deselected by default, run by CI's own step), and skipped, saying why,
    where the extra is not installed."""
    missing = pytest.mark.skipif(
        not HAVE_SGLANG,
        reason="SGLang is not installed: pip install -r extras/sglang-cpu.txt && "
        "pip install --no-deps sglang==0.5.23",
    )
    return pytest.mark.sglang(missing(test))


@pytest.mark.skipif(HAVE_SGLANG, reason="SGLang is installed here")
def test_without_sglang_record_exits_2_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["record", "sglang", str(EXAMPLES / "tight-pool.json"), "-o", str(tmp_path / "l")])
    assert code == 2
    assert "extras/sglang-cpu.txt" in capsys.readouterr().err


def test_what_the_sglang_recorder_has_no_setting_for_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = str(EXAMPLES / "tight-pool.json")
    code = main(["record", "sglang", workload, "-o", str(tmp_path / "l"), "--watermark", "0.1"])
    assert code == 2
    assert "--watermark" in capsys.readouterr().err


def _record(workload: Any, log: Path, **options: Any) -> str:
    from kvsched.checks.record.registry import record_log

    iterations = record_log("sglang", workload, log, RecordOptions(**options))
    assert iterations > 0
    return log.read_text()


@needs_sglang
def test_a_tight_pool_retracts_and_checks_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_INIT_NEW_TOKEN_RATIO", TIGHT_RATIO)
    log = tmp_path / "run.jsonl"
    text = _record(load_workload(EXAMPLES / "tight-pool.json"), log, token_budget=32)
    assert '"preempt"' in text and '["decode",' in text
    assert check_log(log) is None
    assert read_run(log)[0].drained
    # The same with the radix cache off (SGLang's --disable-radix-cache): no prefix sharing.
    log = tmp_path / "uncached.jsonl"
    workload = load_workload(EXAMPLES / "tight-pool.json")
    text = _record(workload, log, token_budget=32, prefix_caching=False)
    assert '"preempt"' in text and '"share"' not in text
    assert check_log(log) is None


@needs_sglang
def test_shared_prefixes_hit_the_radix_tree_and_check_clean(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    text = _record(load_workload(EXAMPLES / "shared-prefix.json"), log, token_budget=64)
    assert '["share","b"' in text and '["cache","b",32]' in text  # two 16-token pages of 40
    assert check_log(log) is None


@needs_sglang
def test_priorities_check_clean(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    workload = load_workload(EXAMPLES / "priorities.json")
    _record(workload, log, token_budget=32, policy="priority")
    assert check_log(log) is None
    # SGLang's queue under priority: d and f (priority 0) were admitted before a, c and e (2)
    # that arrived no later, which FCFS would have admitted first.
    admitted = [
        op[1] for line in log.read_text().splitlines() for op in _ops(line) if op[0] == "admit"
    ]
    assert admitted.index("f") < admitted.index("e")


def _ops(line: str) -> list[Any]:
    import json

    record = json.loads(line)
    return list(record.get("ops", ()))


@needs_sglang
def test_early_stops_and_aborts_check_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_INIT_NEW_TOKEN_RATIO", TIGHT_RATIO)
    log = tmp_path / "run.jsonl"
    workload = load_workload(EXAMPLES / "tight-pool.json")
    _record(workload, log, token_budget=32, early_stops=True)
    assert check_log(log) is None
    assert read_run(log)[0].drained
    tokens = dict.fromkeys((r.id for r in workload.requests), 0)
    for line in log.read_text().splitlines()[1:]:
        for op in _ops(line):
            if op[0] == "token":
                tokens[op[1]] += 1
            elif op[0] == "decode":
                for rid in op[1]:
                    tokens[rid] += 1
    # b and g sample the stop token as their 8th output token; a is aborted while it decodes
    # (its 19th iteration in the engine), d while it waits in the queue, before any token.
    assert tokens["b"] == tokens["g"] == 8
    assert 0 < tokens["a"] < 20 and tokens["d"] == 0
    assert tokens["c"] == 18 and tokens["h"] == 10  # the others run to their length


@needs_sglang
@pytest.mark.parametrize("family", ["poisson-short-tight", "bursty-heavy-tight"])
def test_generated_workloads_check_clean(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGLANG_INIT_NEW_TOKEN_RATIO", TIGHT_RATIO)
    log = tmp_path / "run.jsonl.gz"
    from kvsched.checks.record.registry import record_log

    record_log("sglang", generate(family, 60, 3), log, RecordOptions(token_budget=128))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)


@needs_sglang
def test_a_request_sglang_never_admits_is_refused(tmp_path: Path) -> None:
    # 4 prompt + 36 output + a page of 4 for alignment is 44 tokens, not below the 44 of 11
    # usable pages: SGLang's PrefillAdder would leave it waiting forever.
    import dataclasses

    workload = load_workload(EXAMPLES / "tight-pool.json")
    big = dataclasses.replace(workload.requests[0], prompt_tokens=4, output_tokens=36)
    workload = dataclasses.replace(workload, requests=(big, *workload.requests[1:]))
    with pytest.raises(RecorderError, match="at least 13"):
        _record(workload, tmp_path / "run.jsonl", token_budget=32)


@needs_sglang
def test_a_prefix_computed_side_by_side_is_refused_not_misrecorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a and b arrive together and compute their shared 16 tokens in one prefill; when b's KV
    # goes into the tree, SGLang swaps b's first pages for a's copies: a change in the middle of
    # b's table that a version-2 log cannot say: exit 2, naming it.
    workload = tmp_path / "side.json"
    group = '"prefix_group": "s", "prefix_tokens": 16'
    workload.write_text(
        '{"format": 1, "name": "side", "limits": {"batch_limit": 4, "page_size": 4, '
        '"pool_pages": 40}, "requests": ['
        f'{{"id": "a", "arrival": 0, "prompt_tokens": 20, "output_tokens": 4, {group}}}, '
        f'{{"id": "b", "arrival": 0, "prompt_tokens": 20, "output_tokens": 4, {group}}}]}}'
    )
    log = tmp_path / "run.jsonl"
    code = main(["record", "sglang", str(workload), "-o", str(log), "--token-budget", "64"])
    assert code == 2
    assert "replaced pages of 'b'" in capsys.readouterr().err


@needs_sglang
def test_whole_prompts_check_clean_under_a_budget_that_holds_them(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    workload = load_workload(EXAMPLES / "shared-prefix.json")
    _record(workload, log, token_budget=128, chunked_prefill=False)
    assert check_log(log) is None
    # SGLang admits a batch's first prompt whole whatever the budget: refused below it.
    with pytest.raises(RecorderError, match="raise the budget"):
        _record(workload, tmp_path / "over.jsonl", token_budget=64, chunked_prefill=False)


# Bugs planted in SGLang's own code from outside, as a patched release would ship them.


@needs_sglang
def test_a_retraction_that_keeps_its_pages_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sglang.srt.managers.schedule_batch import ScheduleBatch
    from sglang.srt.mem_cache.radix_cache import RadixCache

    retract = ScheduleBatch.retract_decode

    def leaky_retract(self: Any) -> Any:
        # The retracted requests' rows go back and their tree locks are released, but the
        # pages they own beyond the tree (their decoded tokens') never reach the free list.
        with monkeypatch.context() as inside:
            inside.setattr(RadixCache, "free_kv_row", lambda self, kv, ranges: None)
            return retract(self)

    monkeypatch.setattr(ScheduleBatch, "retract_decode", leaky_retract)
    monkeypatch.setenv("SGLANG_INIT_NEW_TOKEN_RATIO", TIGHT_RATIO)
    log = tmp_path / "run.jsonl"
    text = _record(load_workload(EXAMPLES / "tight-pool.json"), log, token_budget=32)
    assert '"preempt"' in text
    finding = check_log(log)
    assert finding is not None and finding.invariant == "PAGE-3", finding


@needs_sglang
def test_a_radix_tree_lock_never_released_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sglang.srt.mem_cache.radix_cache import RadixCache

    # A finished request's path stays locked: its pages never become evictable.
    monkeypatch.setattr(RadixCache, "dec_lock_ref", lambda self, node, *a, **k: 0)
    log = tmp_path / "run.jsonl"
    _record(load_workload(EXAMPLES / "shared-prefix.json"), log, token_budget=64)
    finding = check_log(log)
    assert finding is not None and finding.invariant == "PAGE-3", finding
