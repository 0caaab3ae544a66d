"""A verdict that is not delivered whole is no pass: a closed pipe, a full disk, ``ulimit -f``.

A grader gates on the exit code. If the reader of kvsched's output goes away (``| head``), the
disk fills or the shell's file-size limit cuts a file short, what the grader reads is not the
verdict, and the exit code must say so: WRITE_FAILED (5), with one line on stderr naming what
could not be written, never 0 (the old mapping of a broken pipe), never 3 with a traceback, and
never a half-written JUnit file left in place. A passing target's output lost this way is no
pass either: the failed write wins over the verdict. The real program runs here, as these are
attacks on its process's outputs.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from attack_harness import FAST, SLACK_SECONDS, write_attack

from kvsched.spec.vocabulary import ExitCode

PASSING = "kvsched.reference:ContinuousScheduler"
FILE_LIMIT = 2048
"""Bytes, RLIMIT_FSIZE: a passing check's JUnit file is several times this."""


def _command(spec: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kvsched", "check", spec, "--timeout", "1", *FAST, *extra]


def _targets(folder: Path) -> list[str]:
    return [f"{write_attack(folder, '')}:Buggy", PASSING]


def _clean_failure(code: int, err: str, what: str) -> None:
    """Exit 5, one line on stderr naming ``what``, no traceback nor interpreter noise."""
    assert code == ExitCode.WRITE_FAILED, (code, err)
    assert err.count("\n") == 1 and err.startswith("kvsched check: cannot write "), err
    assert what in err, err
    assert "no pass" in err, err
    assert "Traceback" not in err and "Exception ignored" not in err, err


@pytest.mark.parametrize("which", ["buggy", "passing"])
def test_a_reader_that_closed_the_pipe_gets_no_pass(tmp_path: Path, which: str) -> None:
    spec = _targets(tmp_path)[which == "passing"]
    process = subprocess.Popen(
        _command(spec, "--json"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader is gone before kvsched writes: EPIPE, for certain
    _, err = process.communicate(timeout=SLACK_SECONDS + 30)
    _clean_failure(process.returncode, err, "standard output (Broken pipe")


def test_head_reading_part_of_the_verdict_is_no_pass(tmp_path: Path) -> None:
    """``kvsched check --json BUGGY | head -c 10``, the shell's own pipe: never exit 0."""
    command = " ".join(_command(f"{write_attack(tmp_path, '')}:Buggy", "--json"))
    shell = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -c 10"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SLACK_SECONDS + 30,
        check=False,
    )
    assert shell.returncode in (ExitCode.FINDING, ExitCode.WRITE_FAILED), shell
    assert len(shell.stdout) == 10 and "Traceback" not in shell.stderr, shell


@pytest.mark.parametrize("which", ["buggy", "passing"])
def test_a_full_disk_is_no_pass(tmp_path: Path, which: str) -> None:
    spec = _targets(tmp_path)[which == "passing"]
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            _command(spec, "--json"),
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=SLACK_SECONDS + 30,
            check=False,
        )
    _clean_failure(result.returncode, result.stderr, "standard output (No space left on device")


DEFAULT_SIGXFSZ = (
    "import signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); "
    "from kvsched.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""kvsched with SIGXFSZ at its default action (kill), as an embedding interpreter leaves it."""


@pytest.mark.parametrize("sigxfsz", ["python's", "default"])
def test_the_file_size_limit_leaves_the_old_file_whole(tmp_path: Path, sigxfsz: str) -> None:
    """``ulimit -f`` during --junit-xml: exit 5, and report.xml is the old one, not half a new
    one (nor a temporary file left beside it)."""
    report = tmp_path / "report.xml"
    report.write_text("<old/>\n")
    command = _command(PASSING, "--junit-xml", str(report))
    if sigxfsz == "default":
        command[1:3] = ["-c", DEFAULT_SIGXFSZ]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))

    result = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SLACK_SECONDS + 30,
        check=False,
        # Importing kvsched, before it ignores SIGXFSZ, must not write a .pyc past the limit.
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=limit,
    )
    _clean_failure(result.returncode, result.stderr, f"{report} (File too large")
    assert result.stdout, result  # the table went to its pipe; only the file failed
    assert report.read_text() == "<old/>\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]
