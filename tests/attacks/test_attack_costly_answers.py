"""Answers cheap for the target and costly for kvsched: refused by their bound, at once (PROTO-1).

Each trick is one line in the target: a tuple of twelve million references to one string, a jump
of 1.5 x 10**8 tokens, a page table of 10**7 entries, a learner's state holding twelve million
references to one empty list or nested thousands of levels deep. Read as they come, each made
kvsched work for minutes and gigabytes (or hang); held to what the workload allows
(checks/targets/bounds.py), each is a PROTO-1 finding that names the field and the bound, within
seconds. A correct scheduler whose page table is exactly as long as the pool is not flagged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from attack_harness import check_in_process, failed, write_attack

from kvsched.checks.targets.bounds import BoundError, SchedulerBounds
from kvsched.spec.protocol import ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request

FAST_SECONDS = 45.0
"""The teaching trace, shrunk: a dozen runs, each meeting the answer once (about 0.1 s of
kvsched's time each, and the target's own to build and send it: 2 s in all at rest); unbounded,
each took minutes."""

DEADLINE = 30.0
"""The per-call deadline: building and sending an answer of ten million entries is the target's
own time, 0.3 s at rest but 5.9 s in a CI run whose other workers ran attacks that spin every
core, where the finding must be the bound, not the deadline. The words asserted are the bound's,
so a kvsched that read the answer instead would still fail here, on the deadline's words."""

REFERENCES = """
from dataclasses import replace

class Attack(Buggy):
    def schedule(self):
        batch = super().schedule()
        return replace(batch, waiting=("a",) * 12_000_000)
"""

COMPUTED = """
from dataclasses import replace

class Attack(Buggy):
    def schedule(self):
        batch = super().schedule()
        return replace(batch, computed={rid: 150_000_000 for rid in batch.decode})
"""

PAGES = """
from dataclasses import replace

class Attack(Buggy):
    def schedule(self):
        batch = super().schedule()
        return replace(batch, page_tables={rid: (0,) * SIZE for rid in batch.decode})
"""

CORRECT = Path(__file__).parents[2] / "examples" / "learner" / "correct.py"


def _learner(folder: Path, trick: str) -> Path:
    path = folder / "solution.py"
    source = CORRECT.read_text(encoding="utf-8").replace("def schedule_iteration(", "def _ok(")
    path.write_text(
        f"{source}\n\ndef schedule_iteration(state, limits, policy):\n"
        f"    state = _ok(state, limits, policy)\n    {trick}\n    return state\n",
        encoding="utf-8",
    )
    return path


def _fast(outcome: object, *words: str) -> None:
    failed(outcome, "PROTO-1", *words)  # type: ignore[arg-type]
    assert outcome.seconds < FAST_SECONDS, outcome  # type: ignore[attr-defined]


def test_twelve_million_references_are_refused_unread(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, REFERENCES)
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=DEADLINE)
    _fast(outcome, "bytes, more than the", "'waiting' alone is 24,000,005 bytes")


def test_a_jump_of_computed_tokens_is_refused(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, COMPUTED)
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=DEADLINE)
    _fast(outcome, "ScheduledBatch.computed[", "150,000,000 tokens, more than the")


def test_a_page_table_of_ten_million_is_refused_unread(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, PAGES.replace("SIZE", "10**7"))
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=DEADLINE)
    _fast(outcome, "'page_tables' alone is 10,000,00")


def test_a_page_table_longer_than_the_pool_is_refused(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, PAGES.replace("SIZE", "(POOL + 1)"))
    source = path.read_text(encoding="utf-8").replace("class Attack(Buggy):", _POOL_ATTACK)
    path.write_text(source, encoding="utf-8")
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=DEADLINE)
    _fast(outcome, "ScheduledBatch.page_tables[", "pages, more than the pool's")


_POOL_ATTACK = """POOL = 0

class Attack(Buggy):
    def __init__(self, limits):
        global POOL
        POOL = limits.pool_pages
        super().__init__(limits)
"""


def test_a_learners_jump_of_generated_is_refused(tmp_path: Path, capsys: object) -> None:
    trick = 'for r in state["running"]: r["generated"] += 150_000_000'
    outcome = check_in_process(capsys, str(_learner(tmp_path, trick)), timeout=DEADLINE)
    _fast(outcome, "'generated' grew by 150000001 in one iteration, past its whole output")


def test_a_learners_twelve_million_lists_are_refused(tmp_path: Path, capsys: object) -> None:
    trick = 'state["mine"] = [[]] * 12_000_000'
    outcome = check_in_process(capsys, str(_learner(tmp_path, trick)), timeout=DEADLINE)
    _fast(outcome, "a learner's state can need", "'mine' alone is")


def test_a_learners_deep_nesting_is_refused(tmp_path: Path, capsys: object) -> None:
    trick = 'state["mine"] = []\n    for _ in range(980): state["mine"] = [state["mine"]]'
    outcome = check_in_process(capsys, str(_learner(tmp_path, trick)), timeout=DEADLINE)
    _fast(outcome, "nested too deeply to read")


def _at_the_pool(folder: Path) -> Path:
    """One request whose last iteration holds every page of the pool (3 prompt + 1 output)."""
    workload = {
        "format": 1,
        "name": "full-pool",
        "limits": {"batch_limit": 1, "page_size": 1, "pool_pages": 4},
        "requests": [{"id": "a", "arrival": 0, "prompt_tokens": 3, "output_tokens": 1}],
    }
    path = folder / "full.json"
    path.write_text(json.dumps(workload), encoding="utf-8")
    return path


@pytest.mark.parametrize("learner", [False, True], ids=["scheduler", "learner"])
def test_a_table_as_long_as_the_pool_is_no_alarm(
    tmp_path: Path, capsys: object, learner: bool
) -> None:
    if learner:
        target = str(_learner(tmp_path, "pass"))
    else:
        target = f"{tmp_path / 'good.py'}:Good"
        (tmp_path / "good.py").write_text(
            "from kvsched.reference import ContinuousScheduler\n\n"
            "class Good(ContinuousScheduler):\n    pass\n",
            encoding="utf-8",
        )
    outcome = check_in_process(capsys, target, "--workload", str(_at_the_pool(tmp_path)))
    assert outcome.code == 0, outcome


def test_each_bound_admits_its_limit_and_refuses_one_more() -> None:
    held = SchedulerBounds(Limits(batch_limit=2, page_size=1, pool_pages=4))
    for request in (Request("a", 0, 3, 2), Request("b", 0, 1, 1)):
        held.add(request)

    def batch(**fields: object) -> ScheduledBatch:
        return ScheduledBatch(**{"admitted": (), "decode": (), **fields})

    within = [
        batch(page_tables={"a": (0, 1, 2, 3), "b": (0, 1, 2, 3)}),
        batch(decode=("a", "a", "a", "b", "b")),  # each its whole output and one more
        batch(computed={"a": 5, "b": 2}, cached={"a": 5}),
        batch(admitted=("a", "b"), waiting=("b", "a")),
    ]
    for answer in within:
        held.check("schedule", answer)
    held.check("update_from_output", StepOutcome(("a", "b"), {"a": (0, 1, 2, 3)}, 4))
    beyond = [
        batch(page_tables={"a": (0, 1, 2, 3, 4)}),
        batch(decode=("b", "b", "b")),
        batch(computed={"a": 6}),
        batch(cached={"b": 3}),
        batch(waiting=("a", "b", "a")),
        batch(shared={"a": (), "b": (), "c": ()}),
    ]
    for answer in beyond:
        with pytest.raises(BoundError):
            held.check("schedule", answer)
    with pytest.raises(BoundError, match=r"StepOutcome\.freed"):
        held.check("update_from_output", StepOutcome((), {"a": (0,) * 5}, 4))
