"""The command line's own endings: a failed write (exit 5), SIGTERM and Ctrl-C (143, 130).

tests/attacks/test_attack_outputs.py and test_attack_interrupt.py run the real program against
a closed pipe, /dev/full, ``ulimit -f`` and real signals; these run ``main`` in this process for
what those cannot reach: a file write failing after its data went out, stdout closed at start,
a second signal during the clean-up, and the handlers left as they were found.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from kvsched import cli
from kvsched.checks.verdict import files
from kvsched.checks.verdict.files import write_file
from kvsched.cli import main
from kvsched.commands import replay
from kvsched.spec.vocabulary import ExitCode

REPLAY = ["replay", "family:poisson-short-roomy:6:1", "--timeline", "none"]


class _BrokenPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_file_whose_write_fails_is_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.xml"
    path.write_text("<old/>\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as raised:
        write_file(path, "<new/>\n")
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(path)  # the user's name, not the temporary one
    assert path.read_text() == "<old/>\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.xml"]


def test_a_file_is_written_whole_in_text_or_bytes(tmp_path: Path) -> None:
    write_file(tmp_path / "a.txt", "naïve\n")
    write_file(tmp_path / "b.png", b"\x89PNG")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "naïve\n"
    assert (tmp_path / "b.png").read_bytes() == b"\x89PNG"


def test_a_broken_stdout_is_exit_5_not_a_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(REPLAY) == ExitCode.OK
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdout", _BrokenPipe())
    assert main(REPLAY) == ExitCode.WRITE_FAILED
    err = capsys.readouterr().err
    assert err.startswith("kvsched replay: cannot write standard output (Broken pipe: "), err
    assert err.count("\n") == 1, err


def test_a_closed_stdout_is_exit_5(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started with fd 1 closed, Python's sys.stdout is None and print() drops the verdict."""
    monkeypatch.setattr(sys, "stdout", None)
    assert main(REPLAY) == ExitCode.WRITE_FAILED
    assert "cannot write standard output (Bad file descriptor" in capsys.readouterr().err


def test_an_output_file_that_cannot_be_written_is_exit_5_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target.py"
    target.write_text("from kvsched.reference import ContinuousScheduler as Target\n")
    junit = tmp_path / "no such folder" / "report.xml"
    argv = ["check", f"{target}:Target", "--no-hypothesis", "--z3-requests", "0"]
    assert main([*argv, "--junit-xml", str(junit)]) == ExitCode.WRITE_FAILED
    captured = capsys.readouterr()
    assert "VIOLATION" not in captured.out  # the verdict itself was a pass, and was printed
    assert f"kvsched check: cannot write --junit-xml {junit} (No such file" in captured.err


def _stopped_by(
    sent: signal.Signals, monkeypatch: pytest.MonkeyPatch, then: signal.Signals | None = None
) -> list[str]:
    """``kvsched replay`` whose work is a signal to itself; what its clean-up got to do."""
    cleaned: list[str] = []

    def work(args: argparse.Namespace) -> int:
        try:
            os.kill(os.getpid(), sent)
            time.sleep(5)  # the handler raises before this ends
            return 0
        finally:
            if then is not None:
                os.kill(os.getpid(), then)  # a second signal, while the first unwinds
            cleaned.append("host killed")

    monkeypatch.setattr(replay, "main", work)
    return cleaned


@pytest.mark.parametrize(
    ("sent", "code", "line"),
    [
        (signal.SIGTERM, ExitCode.TERMINATED, "kvsched replay: terminated (SIGTERM); no verdict"),
        (signal.SIGINT, ExitCode.INTERRUPTED, "kvsched replay: interrupted (SIGINT, Ctrl-C)"),
    ],
)
def test_a_signal_runs_the_clean_up_and_ends_with_its_code(
    sent: signal.Signals,
    code: int,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGXFSZ)}
    cleaned = _stopped_by(sent, monkeypatch)
    assert main(REPLAY) == code
    assert cleaned == ["host killed"]
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1, err
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # left as found


def test_a_second_signal_does_not_cut_the_clean_up_short(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cleaned = _stopped_by(signal.SIGTERM, monkeypatch, then=signal.SIGINT)
    assert main(REPLAY) == ExitCode.TERMINATED
    assert cleaned == ["host killed"]
    assert "Traceback" not in capsys.readouterr().err


def test_solvers_are_usable_once_a_signalled_command_returns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The watchdog cancels Z3's context for a signal; it is done before ``main`` returns, so a
    caller's next solve (here, a test's on the same worker) is not "push canceled"."""
    import z3

    interrupt = cli._interrupt_solvers

    def late() -> None:  # a watchdog that the interpreter wakes late, as on a busy machine
        time.sleep(0.3)
        interrupt()

    monkeypatch.setattr(cli, "_interrupt_solvers", late)
    _stopped_by(signal.SIGINT, monkeypatch)
    assert main(REPLAY) == ExitCode.INTERRUPTED
    time.sleep(0.5)  # long past the late interrupt
    z3.Solver().push()
    capsys.readouterr()
