"""``kvsched record nanovllm --src CHECKOUT``: a nano-vllm checkout's own scheduler, on CPU.

The recording tests are marked ``nanovllm`` and need the extra (extras/nanovllm-cpu.txt) and a
checkout named by ``KVSCHED_NANOVLLM_SRC``: CI unpacks the wheel of the PyPI fork
``nano-vllm-fork==20260210`` (nano-vllm's classic scheduler, before chunked prefill, with CFG
additions) and runs them in a step of their own. That fork has a preemption bug of its own
(:func:`test_the_forks_own_preemption_bug_is_caught`); the clean runs and the planted bugs use
a copy with that one line fixed, as upstream's ``self.running.pop()`` has it.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
from pathlib import Path

import pytest

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.record.base import RecordOptions
from kvsched.checks.record.nanovllm_engine import FILES, load
from kvsched.cli import main
from kvsched.reference.families import FAMILIES, generate
from kvsched.spec.workload import Workload, load_workload, peak_pages

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nanovllm"


def test_a_folder_that_is_not_a_checkout_exits_2_saying_what_was_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nanovllm").mkdir()
    (tmp_path / "nanovllm" / "llm.py").write_text("")
    log = tmp_path / "run.jsonl"
    args = ["record", "nanovllm", str(EXAMPLES / "tight-pool.json"), "-o", str(log)]
    assert main([*args, "--src", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a nano-vllm checkout" in err and "nanovllm/engine/scheduler.py" in err
    assert not log.exists()
    assert main(args) == 2
    assert "--src" in capsys.readouterr().err


def test_a_package_folder_instead_of_its_checkout_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "scheduler.py").write_text("")
    args = ["record", "nanovllm", str(EXAMPLES / "tight-pool.json"), "-o", str(tmp_path / "l")]
    assert main([*args, "--src", str(tmp_path)]) == 2
    assert "pass its parent folder" in capsys.readouterr().err


def test_what_nano_vllm_has_no_setting_for_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _, path in FILES:  # a checkout in name only: each refusal comes before it is loaded
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    out = ["-o", str(tmp_path / "run.jsonl"), "--src", str(tmp_path)]
    example = str(EXAMPLES / "tight-pool.json")
    assert main(["record", "nanovllm", example, *out, "--policy", "priority"]) == 2
    assert "no such setting: --policy priority" in capsys.readouterr().err
    # vLLM's example caps 4 running requests in a pool of 12: nano-vllm caps a step instead.
    vllm_example = str(EXAMPLES.parent / "vllm" / "tight-pool.json")
    assert main(["record", "nanovllm", vllm_example, *out]) == 2
    assert "spec/eventlog.md 4.12" in capsys.readouterr().err
    assert main(["record", "vllm", example, *out]) == 2
    assert "only of it" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fork() -> Path:
    src = os.environ.get("KVSCHED_NANOVLLM_SRC")
    if not src:
        pytest.fail("KVSCHED_NANOVLLM_SRC names no checkout: see .ci/run's nano-vllm step")
    return Path(src)


def patched(checkout: Path, into: Path, file: str, old: str, new: str) -> Path:
    """A copy of ``checkout`` with ``old`` replaced once by ``new`` in ``nanovllm/engine/file``;
    the text must be there exactly once, so a changed checkout fails here, not silently."""
    shutil.copytree(checkout / "nanovllm", into / "nanovllm")
    path = into / "nanovllm" / "engine" / file
    text = path.read_text()
    assert text.count(old) == 1, f"{path} holds {old!r} {text.count(old)} times, not once"
    path.write_text(text.replace(old, new))
    return into


VICTIM = "if other_seq != seq:\n                            self.preempt(other_seq)\n"
FIX = "\n                            self.running.remove(other_seq)\n"


@pytest.fixture(scope="module")
def fixed(fork: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fork with its victim taken out of ``running`` when preempted, as upstream does; a
    checkout without the fork's line (upstream's own) as it is."""
    if VICTIM not in (fork / "nanovllm" / "engine" / "scheduler.py").read_text():
        return fork
    into = tmp_path_factory.mktemp("fixed")
    return patched(fork, into, "scheduler.py", VICTIM, VICTIM.rstrip("\n") + FIX)


def record(src: Path, workload: Workload, log: Path, budget: int = 128) -> str:
    from kvsched.checks.record.registry import record_log

    record_log("nanovllm", workload, log, RecordOptions(budget, source=src))
    opener = gzip.open if log.suffix == ".gz" else open
    with opener(log, "rt") as lines:
        return str(lines.read())


@pytest.mark.nanovllm
def test_the_forks_own_preemption_bug_is_caught(fork: Path, tmp_path: Path) -> None:
    # Its decode loop preempts the next running sequence but leaves it in `running`: the next
    # step appends to a sequence with no blocks, and nano-vllm's may_append raises.
    log = tmp_path / "run.jsonl"
    record(fork, load_workload(EXAMPLES / "tight-pool.json"), log)
    finding = check_stream(log).finding
    assert finding is not None and finding.invariant == "PROTO-1"
    assert "may_append" in finding.message and "IndexError" in finding.message


@pytest.mark.nanovllm
@pytest.mark.parametrize(
    ("workload", "shows"),
    [("tight-pool.json", '"preempt"'), ("shared-prefix.json", '"share"')],
)
def test_example_logs_check_clean_from_the_command_line(
    fixed: Path, workload: str, shows: str, tmp_path: Path
) -> None:
    log = tmp_path / "run.jsonl"
    args = ["record", "nanovllm", str(EXAMPLES / workload), "-o", str(log), "--src", str(fixed)]
    assert main([*args, "--token-budget", "128"]) == 0
    text = log.read_text()
    assert shows in text and '["decode",' in text
    # The classic (as this fork is) declares no chunking, HEAD chunks the first prompt.
    assert ('"chunking":"first"' in text) == load(fixed).chunked
    assert main(["check", str(log)]) == 0


def crowded(workload: Workload) -> Workload:
    """Three prefix groups sharing up to 48 prompt tokens (never a whole prompt: the fork, as
    the classic nano-vllm, samples from a full prefix hit with nothing computed, nano-vllm #144,
    which :func:`test_a_full_prefix_hit_is_caught` shows), a third of the pool, and the batch
    limit at the pool's size (spec/eventlog.md 4.12)."""
    requests = tuple(
        dataclasses.replace(r, prefix_group=f"g{i % 3}", prefix_tokens=min(48, r.prompt_tokens - 1))
        if i % 4 != 3 and r.prompt_tokens > 1
        else r
        for i, r in enumerate(workload.requests)
    )
    largest = max(peak_pages(r, workload.limits.page_size) for r in requests)
    pool = max(largest, workload.limits.pool_pages // 3)
    limits = dataclasses.replace(workload.limits, pool_pages=pool, batch_limit=pool)
    return dataclasses.replace(workload, requests=requests, limits=limits)


def budget_for(workload: Workload) -> int:
    """A budget the classic can prefill any preempted request under."""
    return max(512, max(r.prompt_tokens + r.output_tokens for r in workload.requests))


@pytest.mark.nanovllm
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_many_requests_preempting_and_sharing_check_clean(
    fixed: Path, family: str, tmp_path: Path
) -> None:
    # 300 requests of each family: the tight ones preempt by the dozen, all hit the cache.
    workload = crowded(generate(family, 300, 3))
    log = tmp_path / "run.jsonl.gz"
    text = record(fixed, workload, log, budget_for(workload))
    checked = check_stream(log, all_findings=True)
    assert checked.finding is None, (checked.finding, checked.later)
    assert '"share"' in text
    assert "tight" not in family or '"preempt"' in text


FULL_HIT = """{"format": 1, "name": "full-hit", "limits": {"batch_limit": 8, "page_size": 16,
"pool_pages": 8}, "requests": [
{"id": "a", "arrival": 0, "prompt_tokens": 32, "output_tokens": 8, "prefix_group": "p",
 "prefix_tokens": 32},
{"id": "b", "arrival": 2, "prompt_tokens": 32, "output_tokens": 8, "prefix_group": "p",
 "prefix_tokens": 32}]}"""


@pytest.mark.nanovllm
def test_a_full_prefix_hit_is_caught(fixed: Path, tmp_path: Path) -> None:
    # b's whole prompt is two full blocks that a holds: the classic's allocate hits both,
    # leaves nothing to compute, and the step samples b's token anyway (nano-vllm #144;
    # upstream's HEAD never hits a sequence's last block).
    (tmp_path / "w.json").write_text(FULL_HIT)
    log = tmp_path / "run.jsonl"
    record(fixed, load_workload(tmp_path / "w.json"), log)
    finding = check_stream(log).finding
    assert finding is not None and finding.invariant == "DEC-3" and "'b'" in finding.message


PLANTED = [
    # (what, file, old, new, an example or a family, the id that catches it)
    (
        "deallocate forgets a sequence's first block",
        "block_manager.py",
        "for block_id in reversed(seq.block_table):",
        "for block_id in reversed(seq.block_table[1:]):",
        "tight-pool.json",
        "PAGE-3",
    ),
    (
        "can_append asks for a block one token early: may_append then takes from an empty pool",
        "block_manager.py",
        "(len(seq) % self.block_size == 1)",
        "(len(seq) % self.block_size == 0)",
        "tight-pool.json",
        "PROTO-1",
    ),
    (
        "a preemption keeps its blocks",
        "scheduler.py",
        "        self.block_manager.deallocate(seq)\n        self.waiting.appendleft(seq)",
        "        self.waiting.appendleft(seq)",
        "poisson-short-tight",
        "PAGE-4",
    ),
]


@pytest.mark.nanovllm
@pytest.mark.parametrize(
    ("what", "file", "old", "new", "workload", "expected"), PLANTED, ids=[p[0] for p in PLANTED]
)
def test_planted_bugs_in_nano_vllms_own_code_are_caught(
    fixed: Path,
    what: str,
    file: str,
    old: str,
    new: str,
    workload: str,
    expected: str,
    tmp_path: Path,
) -> None:
    del what
    src = patched(fixed, tmp_path / "src", file, old, new)
    if workload.endswith(".json"):
        chosen = load_workload(EXAMPLES / workload)
    else:
        chosen = crowded(generate(workload, 60, 3))
    log = tmp_path / "run.jsonl"
    record(src, chosen, log, budget_for(chosen))
    finding = check_stream(log).finding
    assert finding is not None and finding.invariant == expected, finding
    # The unpatched copy is clean on the same workload: the bug is what was caught.
    record(fixed, chosen, tmp_path / "clean.jsonl", budget_for(chosen))
    assert check_stream(tmp_path / "clean.jsonl").finding is None
