"""Answers a user can act on: their own frames, their own function names, the cause before a
crash, and no invariant skipped without saying so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsched import cli
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.targets.load import load_target
from kvsched.checks.verdict.render import render_table
from kvsched.spec.vocabulary import ExitCode
from kvsched.spec.workload import Limits, Request, Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "learner"
FAST = CheckOptions(hypothesis=False, proof_requests=0)

CRASHING_CLASS = """
from kvsched.reference.continuous import ContinuousScheduler

class Crashes(ContinuousScheduler):
    def schedule(self):
        if len(self.waiting) >= 2:
            self.helper()
        return super().schedule()

    def helper(self):
        return [].pop()
"""


def test_a_raising_scheduler_shows_the_users_frames(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target runs in a host process; its frames cross the wire as text."""
    path = tmp_path / "crashing.py"
    path.write_text(CRASHING_CLASS)
    argv = ["check", f"{path}:Crashes", "--no-hypothesis", "--z3-requests", "0", "--json"]
    argv += ["--save-dir", str(tmp_path / "saved")]
    assert cli.main(argv) == 1
    message = json.loads(capsys.readouterr().out)["verdicts"][0]["finding"]["message"]
    assert message.startswith("schedule() failed: IndexError: pop from empty list")
    assert f"{path}, line 7, in schedule: self.helper()" in message
    assert f"{path}, line 11, in helper: return [].pop()" in message
    assert "kvsched/reference/engine.py" not in message  # our frames are not the user's


def test_a_learner_crash_names_schedule_iteration_and_the_cause(tmp_path: Path) -> None:
    source = (EXAMPLES / "correct.py").read_text()
    check = 'if committed + peak_pages(head, page_size) > limits["pool_pages"]:'
    assert check in source
    path = tmp_path / "overadmits.py"
    path.write_text(source.replace(check, "if False:  # admits without counting pages"))
    # Two prompts of 2 pages into a pool of 3: admitting both empties the free list mid-call.
    crowded = Workload("crowded", Limits(2, 1, 3), (Request("a", 0, 2, 1), Request("b", 0, 2, 1)))
    options = CheckOptions(workload=crowded, policy="continuous", hypothesis=False)
    report = check_target(load_target(str(path)), options)
    (verdict,) = report.verdicts
    assert verdict.finding is not None and verdict.finding.invariant == "PROTO-1"
    message = verdict.finding.message
    assert message.startswith("schedule_iteration() failed: IndexError")
    assert "schedule()" not in message
    # named on the shrunk witness: two requests of one token each in a pool of one page
    cause = "the running requests (a, b) need 2 pages at their peaks, more than the pool's 1"
    assert f"likely cause: {cause}" in message
    assert f"{path}, line " in message and "free_pages.pop(0)" in message


def test_undeclared_policy_is_said_in_words(tmp_path: Path) -> None:
    path = tmp_path / "undeclared.py"
    path.write_text(
        "from kvsched.reference.continuous import ContinuousScheduler\n\n"
        "class Undeclared(ContinuousScheduler):\n    policy = ''\n"
    )
    report = check_target(load_target(f"{path}:Undeclared"), FAST)
    text = render_table(report)
    assert "Conformance was not checked (BATCH-2, BATCH-3, BATCH-4" in text
    assert 'policy = "continuous"' in text and "--policy" in text
    assert "every invariant holds" not in text
    assert "some were not checked (no policy declared)" in text
    declared = check_target(load_target(f"{path}:Undeclared"), CheckOptions(
        hypothesis=False, proof_requests=0, policy="continuous"
    ))  # fmt: skip
    assert "Conformance was not checked" not in render_table(declared)


def test_the_lessons_allocator_passes_through_the_host_even_for_10_30(tmp_path: Path) -> None:
    """Ints past msgpack's 64 bits reach the target's process and come back exact."""
    path = tmp_path / "lesson.py"
    path.write_text(
        "def allocate_kv_pages(tokens, page_size=16):\n"
        "    pages = (tokens + page_size - 1) // page_size\n"
        "    return {'pages': pages, 'capacity': pages * page_size,\n"
        "            'wastedSlots': pages * page_size - tokens}\n"
    )
    report = check_target(load_target(str(path)), FAST)
    assert report.allocator is not None and report.allocator.finding is None
    assert report.allocator.advice  # a negative count, a float ... : advice, not a finding
    # No finding; the file has no schedule_iteration, so the check is no pass either.
    assert report.exit_code == ExitCode.INCONCLUSIVE
