"""Every path that hosts or judges a target comes in through the judge's door.

``kvsched check``, the pytest plugin, ``kvsched sweep`` and ``kvsched report --policies`` host a
target and judge its runs only through :mod:`kvsched.checks.judge`; none reaches past it into the
monitor or the targets' loading and hosting. Followed from ``kvsched check`` to its verdict, a
target's kind is read once, it is loaded once, and the path returns to a module it had already
left at most five times.
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from kvsched.checks.judge.door import TargetError, hosted_scheduler
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.learner import LearnerSolution
from kvsched.checks.targets.load import EventLogTarget, LearnerTarget, SchedulerTarget
from kvsched.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOORWAYS = (
    *sorted((ROOT / "reports" / "sweep").glob("*.py")),
    ROOT / "cli" / "commands" / "policies.py",
    ROOT / "cli" / "commands" / "sweep.py",
    ROOT / "cli" / "commands" / "check.py",
    ROOT / "checks" / "pytest_plugin.py",
)
"""The modules through which a user has a target judged or hosted."""
BEHIND_THE_DOOR = ("kvsched.checks.monitor", "kvsched.checks.targets")
STATED_BY_THE_CALLER = ("kvsched.checks.targets.confinement",)
"""The limits a target runs under are the caller's to state (command-line options, a grid)."""


def _imported(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


@pytest.mark.parametrize("path", DOORWAYS, ids=lambda p: str(p.relative_to(ROOT)))
def test_hosting_and_judging_go_through_the_judge(path: Path) -> None:
    past = [
        module
        for module in _imported(path)
        if module.startswith(BEHIND_THE_DOOR) and module not in STATED_BY_THE_CALLER
    ]
    assert past == [], f"{path.name} reaches past the judge's door into {past}"


FOLLOWED = (SchedulerTarget, LearnerTarget, EventLogTarget, LearnerSolution)
"""What a target is once loaded; before that it is its TARGET string."""


def followed(spec: str, argv: list[str]) -> tuple[int, list[tuple[str, str]]]:
    """``kvsched check spec *argv``'s exit code, and each call into a kvsched module (function
    and module) that is handed the target: its TARGET string or a loaded form of it (``self``
    aside, so a method called on the target's host is not counted each time it is used)."""
    steps: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event != "call" or not module.startswith("kvsched."):
            return
        code = frame.f_code
        for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
            value = frame.f_locals.get(name)
            if name != "self" and (
                value == spec if type(value) is str else isinstance(value, FOLLOWED)
            ):
                steps.append((module, code.co_qualname))
                return

    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["check", spec, *argv])
    finally:
        sys.setprofile(None)
    return code, steps


def returns(steps: list[tuple[str, str]]) -> int:
    """How many times the path enters a module it had already left."""
    visits = [module for i, (module, _) in enumerate(steps) if i == 0 or steps[i - 1][0] != module]
    return len(visits) - len(set(visits))


@pytest.mark.parametrize(
    "target, code",
    [
        (str(ROOT / "checks" / "mutants" / "learner" / "buggy_leak.py"), 1),
        (str(ROOT / "tests" / "logs" / "orca_like.clean.jsonl"), 0),
    ],
    ids=["learner", "event log"],
)
def test_a_target_is_read_once_loaded_once_and_followed_without_going_back(
    target: str, code: int, tmp_path: Path
) -> None:
    exit_code, steps = followed(target, ["--save-dir", str(tmp_path)])
    assert exit_code == code
    called = [name for _, name in steps]
    assert called.count("target_kind") == 1, called  # the kind is decided once
    assert called.count("load_target") + called.count("RemoteTarget.__init__") == 1, called
    assert returns(steps) <= 5, steps


@pytest.mark.parametrize(
    "target, named",
    [("run.jsonl", "an event log"), ("no/such/solution.py", "a learner's solution")],
)
def test_a_report_refuses_what_is_not_a_scheduler_by_its_form(target: str, named: str) -> None:
    """A sweep and ``report --policies`` run scheduler classes: the door refuses any other kind
    from TARGET's form, before a host starts or the file is even looked for."""
    refused = pytest.raises(TargetError, match=f"a report runs schedulers .*, not {named}$")
    with refused, hosted_scheduler(target, Confinement()):
        pass  # pragma: no cover
