"""How every attack is run: ``kvsched check`` on a hostile target, timed, its outcome kept.

Each attack is a scheduler (or a learner's file) with a real bug plus a trick meant to hide the
bug, hang kvsched, crash it or write where it must not. The check runs in kvsched's own code path
(``kvsched.cli.main``, in this process, or the ``kvsched`` program when the attack is on
kvsched's process itself); the target runs in its host process. A small per-call deadline keeps
the suite fast: an attack must end in a failing verdict (exit 1) or an invalid declaration
(exit 2) within its deadline plus :data:`SLACK_SECONDS`, never in exit 0, 3 or a hang.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvsched.checks.targets.sandbox import SandboxUnavailable, contain
from kvsched.cli import main

SLACK_SECONDS = 20.0
"""Start-up of the host (a fresh Python importing kvsched) and shrinking, on a busy machine."""

BUGGY = '''
from dataclasses import replace
from kvsched.reference import ContinuousScheduler

class Buggy(ContinuousScheduler):
    """Reports every finished request finished again in the next iteration (REQ-2)."""

    def __init__(self, limits):
        super().__init__(limits)
        self._last = ()

    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        again, self._last = self._last, outcome.finished
        return replace(outcome, finished=outcome.finished + again)
'''


def _kind(kind: str) -> object:
    """``kind`` as a test parameter, skipped (saying why) where this machine cannot contain so."""
    try:
        contain(kind)  # type: ignore[arg-type]
    except SandboxUnavailable as error:
        return pytest.param(kind, marks=pytest.mark.skip(reason=str(error)))
    return kind


SANDBOXES = [_kind(kind) for kind in ("bwrap", "uid", "none")]
"""Each containment a test runs under, as its id says; those this machine lacks skip."""
CONTAINED = SANDBOXES[:2]
"""The kinds that contain the target: what kvsched guarantees only where one of them runs."""


def processes_with(text: str) -> list[int]:
    """The live processes (not zombies) whose command line contains ``text``, anywhere."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:  # gone meanwhile
            continue
        if text in command and state != "Z":
            found.append(int(entry.name))
    return found


FAST = ("--no-hypothesis", "--z3-requests", "0", "--budget", "60")


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    seconds: float


def write_attack(folder: Path, source: str, name: str = "attack.py") -> Path:
    path = folder / name
    path.write_text(BUGGY + textwrap.dedent(source), encoding="utf-8")
    return path


def check_in_process(
    capsys: object, spec: str, *extra: str, timeout: float = 1.0, fast: bool = True
) -> Outcome:
    """``kvsched check spec`` through ``kvsched.cli.main`` in this process."""
    started = time.monotonic()
    options = FAST if fast else ()
    code = main(["check", spec, "--timeout", str(timeout), *options, *extra])
    seconds = time.monotonic() - started
    captured = capsys.readouterr()  # type: ignore[attr-defined]
    outcome = Outcome(code, captured.out, captured.err, seconds)
    assert seconds < timeout + SLACK_SECONDS, outcome
    return outcome


def check_program(cwd: Path, spec: str, *extra: str, timeout: float = 1.0) -> Outcome:
    """The ``kvsched`` program itself, for attacks on kvsched's own process."""
    started = time.monotonic()
    command = [sys.executable, "-m", "kvsched", "check", spec, "--timeout", str(timeout)]
    result = subprocess.run(
        [*command, *FAST, *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout + SLACK_SECONDS + 10,
        check=False,
    )
    outcome = Outcome(result.returncode, result.stdout, result.stderr, time.monotonic() - started)
    assert outcome.seconds < timeout + SLACK_SECONDS, outcome
    return outcome


def failed(outcome: Outcome, *words: str) -> None:
    """The check ended in a failing verdict that says ``words``."""
    assert outcome.code == 1, outcome
    assert "VIOLATION found" in outcome.out, outcome
    for word in words:
        assert word in outcome.out, (word, outcome)


def readable_folder(monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder any user may read, for the ``uid`` containment's host to reach the
    submission (pytest's own tmp_path sits in a folder only its owner may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="kvsched-attack-"))
    folder.chmod(0o755)
    monkeypatch.chdir(folder)
    return folder
