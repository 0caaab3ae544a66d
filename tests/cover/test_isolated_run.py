"""kvsched runs nothing from the submission's folder.

A grader runs ``python -m kvsched check`` in the folder a submission wrote. ``python -m`` puts
that folder first on ``sys.path``, so a shipped ``gettext.py`` (argparse imports it) or
``typing.py`` would run inside kvsched and could print a pass and exit 0 before any sandbox
exists. kvsched's root re-executes the command with the folder off the path before it imports
anything. What runpy imports before kvsched's first line (``functools``, ``contextlib`` ...)
cannot be stopped from kvsched's code: for those, the invocations docs/grading.md gives (the
``kvsched`` script, ``python -P -m kvsched``, ``python -I -m kvsched``) must be safe.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from attacks.attack_harness import BUGGY

from kvsched.spec.vocabulary import ExitCode

FORGER = """
open({mark!r}, "a").write({name!r} + "\\n")
print("kvsched check: PASS")
import os
os._exit(0)
"""

AFTER_KVSCHED = ("gettext", "typing", "argparse", "__future__", "enum")
"""Standard modules kvsched's code is the first to import under ``python -m kvsched``."""
BEFORE_KVSCHED = ("functools", "contextlib")
"""Imported by runpy before kvsched's first line: only the safe invocations keep them out."""

CHECK = ["check", "buggy.py:Buggy", "--no-hypothesis", "--z3-requests", "0"]


def _submission(folder: Path, names: tuple[str, ...]) -> Path:
    """A submission's folder: the buggy target, and a forger shadowing each of ``names``."""
    mark = folder / "ran"
    (folder / "buggy.py").write_text(BUGGY, encoding="utf-8")
    for name in names:
        forger = FORGER.format(mark=str(mark), name=name)
        (folder / f"{name}.py").write_text(forger, encoding="utf-8")
    return mark


def _run(command: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("name", AFTER_KVSCHED)
def test_python_m_kvsched_imports_nothing_from_the_folder(tmp_path: Path, name: str) -> None:
    mark = _submission(tmp_path, (name,))
    result = _run([sys.executable, "-m", "kvsched", *CHECK], tmp_path)
    assert not mark.exists(), f"{name}.py ran inside kvsched: {result}"
    assert result.returncode == ExitCode.FINDING, result
    assert "PASS" not in result.stdout, result


def _safe_invocations() -> list[list[str]]:
    script = Path(sys.executable).with_name("kvsched")
    found = [[str(script)]] if script.exists() else []
    found.append([sys.executable, "-I", "-m", "kvsched"])
    if sys.version_info >= (3, 11):
        found.append([sys.executable, "-P", "-m", "kvsched"])
    return found


@pytest.mark.parametrize(
    "invocation", _safe_invocations(), ids=lambda c: " ".join(c[1:]) or "kvsched"
)
def test_the_documented_invocations_run_nothing_from_the_folder(
    tmp_path: Path, invocation: list[str]
) -> None:
    """Even what loads before kvsched's first line stays out; ``-I`` (all Python 3.10 has)
    still finds kvsched installed in the venv, an editable install in strict mode included."""
    mark = _submission(tmp_path, BEFORE_KVSCHED + AFTER_KVSCHED)
    result = _run([*invocation, *CHECK], tmp_path)
    assert not mark.exists(), f"{mark.read_text()} ran inside kvsched: {result}"
    assert result.returncode == ExitCode.FINDING, result
