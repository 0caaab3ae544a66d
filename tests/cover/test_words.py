"""The words of a verdict: counts with their nouns, page ids told from page counts, titles that
fit the violation, preemptions in the trace, and no "smallest" workload that was never shrunk."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import read_log
from kvsched.cli import main
from kvsched.spec.invariants import BY_ID
from kvsched.spec.text import describe_event, describe_workload
from kvsched.spec.workload import Limits, Request, Workload

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "logs"
LEARNER = ROOT / "checks" / "mutants" / "learner"  # the buggy solutions
# A count of one with a plural noun: "1 pages", "prompt of 1 tokens".
ONE_PLURAL = re.compile(
    r"(?<![\d.])1 (?:usable |free |output )?(pages|tokens|requests|slots|cases)\b"
)


def test_a_workload_counts_in_the_singular_and_the_plural() -> None:
    limits = Limits(batch_limit=1, page_size=1, pool_pages=1)
    workload = Workload("w", limits, (Request("a", 0, 1, 1), Request("b", 0, 2, 2)))
    described = "\n".join(describe_workload(workload))
    assert "prompt of 1 token, wants 1 output token." in described
    assert "prompt of 2 tokens, wants 2 output tokens." in described
    assert not ONE_PLURAL.search(described), described


def test_the_trace_shows_preemptions_and_says_page_ids() -> None:
    _, _, events = read_log(LOGS / "vidur_sarathi.preempt_readmit_finish.jsonl")
    line = describe_event(events[2])
    assert line.startswith(
        "iteration 3: a preempted, frees page ids [0 1 2], back to the queue; a join;"
    ), line
    assert "page ids a [0 1 2]" in line
    assert line.endswith("0 pages free")  # a count, in words


# The late bugs show only in the families' crowds, whose shrink is slow-test work (tests/quality).
QUICK = sorted(p.name for p in LEARNER.glob("buggy_*.py") if not p.name.startswith("buggy_late"))


@pytest.mark.parametrize("mutant", QUICK)
def test_a_learners_findings_say_one_page_not_one_pages(
    mutant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", str(LEARNER / mutant), "--max-examples", "20", "--save-dir", str(tmp_path)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert not ONE_PLURAL.search(out), ONE_PLURAL.search(out)


def test_page_3_counts_usable_and_held_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", str(LEARNER / "buggy_leak.py"), "--policy", "static", "--no-hypothesis"]
    assert main([*argv, "--save-dir", str(tmp_path)]) == 1
    assert "but 1 usable page minus 0 pages held leaves 1" in capsys.readouterr().out


def test_a_log_is_not_called_a_smallest_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = LOGS / "orca_like.prompt_only_reservation.jsonl"
    assert main(["check", str(log), "--save-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "Smallest failing workload" not in out
    assert f"The workload of the recorded log {log.name}:" in out


def test_dec_1s_title_fits_a_request_that_produced_no_token() -> None:
    # The lesson model's DEC-1 finding is a request in the batch that produced nothing.
    assert "exactly one in the lesson model" in BY_ID["DEC-1"].title


def test_a_saved_counterexample_is_told_by_its_file_not_by_a_blob() -> None:
    """A person replays the workload file; Hypothesis's blob is for a search's own replay, and
    stays in --json."""
    from dataclasses import replace

    from kvsched.checks.monitor.findings import Finding
    from kvsched.checks.verdict.render import explain
    from kvsched.checks.verdict.report import Evidence, FailingWorkload, build_verdict

    workload = Workload("w", Limits(2, 4, 8), (Request("a", 0, 4, 2),))
    finding = Finding(invariant="PAGE-3", iteration=2, message="page 1 leaked")
    failing = FailingWorkload(workload, "the teaching trace, made smaller by Hypothesis", "AXc=")
    verdict = build_verdict("t", "scheduler", "continuous", Evidence(), finding, failing)
    assert "Hypothesis reproduce blob: AXc=" in explain(verdict)
    saved = replace(verdict, counterexample=replace(failing, saved_to="/tmp/w.json"))
    told = explain(saved)
    assert "blob" not in told
    assert "Workload file: /tmp/w.json" in told
    assert "(the teaching trace, made smaller by Hypothesis)" in told


def test_a_crowd_of_alike_requests_is_one_sentence_and_the_rest_say_what_sets_them_apart() -> None:
    crowd = tuple(Request(f"r{i}", 0, 0, 1) for i in range(100))
    apart = (Request("head", 0, 3, 1, "g", 2), Request("late", 1, 1, 1, priority=-2))
    described = describe_workload(Workload("w", Limits(2, 1, 4), crowd + apart))
    assert described[1] == (
        "r0 to r99, 100 requests in declared order: each arrives at time 0 (may join from "
        "iteration 1), prompt of 0 tokens, wants 1 output token."
    )
    assert (
        described[2].startswith("head: ")
        and "first 2 tokens shared with prefix group g" in (described[2])
    )
    assert described[3].endswith("wants 1 output token, priority -2.")
    assert len(described) == 4
    pair = describe_workload(Workload("w", Limits(2, 1, 4), crowd[:2]))
    assert [line.split(":")[0] for line in pair[1:]] == ["r0", "r1"]  # two are not folded
