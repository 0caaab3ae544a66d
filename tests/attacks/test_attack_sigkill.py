"""A SIGKILL of kvsched, which runs no cleanup of its own, leaves nothing of the target behind.

The target starts a daemon (double fork, a session of its own, asleep) and hangs; kvsched is then
killed by SIGKILL. Under a containment, the daemon ends with kvsched (bubblewrap's PID namespace
ends with its first process, which dies with kvsched; under ``uid`` a reaper kills every process
of the host's uid), and under every kind the scratch folder is removed. Without a sandbox the
daemon may survive, as the verdict's note says.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_harness import CONTAINED, FAST, processes_with, readable_folder, write_attack

from kvsched.checks.targets.confinement import Confinement


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = readable_folder(monkeypatch)
    yield path
    shutil.rmtree(path, ignore_errors=True)


DAEMON = """
import os, sys, time

class Attack(Buggy):
    def schedule(self):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                sleep = "import time; time.sleep(120)"
                os.execv(sys.executable, [sys.executable, "-c", sleep, {marker!r}])
            os._exit(0)
        os.wait()
        time.sleep(60)
"""


def _kill_kvsched_mid_check(folder: Path, sandbox: str, marker: str) -> Path:
    """Start ``kvsched check`` on the daemon's target, SIGKILL it once the daemon runs; the
    folder kvsched's temporary files (the host's scratch folder among them) went to."""
    temporary = folder / "tmp"
    temporary.mkdir(mode=0o755)
    write_attack(folder, DAEMON.format(marker=marker))
    command = [sys.executable, "-m", "kvsched", "check", "attack.py:Attack", *FAST]
    check = subprocess.Popen(
        [*command, "--sandbox", sandbox, "--timeout", "60"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    try:
        ends = time.monotonic() + 60
        while not processes_with(marker):
            assert time.monotonic() < ends, "the target's daemon never started"
            assert check.poll() is None, f"kvsched ended first, with {check.returncode}"
            time.sleep(0.1)
    finally:
        check.send_signal(signal.SIGKILL)
        code = check.wait()
    assert code == -signal.SIGKILL, code  # killed, never a pass
    return temporary


def _gone(what: object, seconds: float = 10.0) -> bool:
    ends = time.monotonic() + seconds
    while what():  # type: ignore[operator]
        if time.monotonic() > ends:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_sigkill_of_kvsched_ends_the_targets_daemon(
    folder: Path, sandbox: str, marker: str
) -> None:
    temporary = _kill_kvsched_mid_check(folder, sandbox, marker)
    try:
        assert _gone(lambda: processes_with(marker)), "the daemon outlived kvsched"
        assert _gone(lambda: list(temporary.glob("kvsched-host-*"))), "the scratch folder stayed"
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_without_a_sandbox_the_scratch_folder_goes_and_the_note_says_what_may_stay(
    folder: Path, marker: str
) -> None:
    """``none`` promises only the scratch folder; its note says the daemon may stay."""
    temporary = _kill_kvsched_mid_check(folder, "none", marker)
    try:
        assert _gone(lambda: list(temporary.glob("kvsched-host-*"))), "the scratch folder stayed"
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
    assert "SIGKILL" in Confinement(sandbox="none").describe()
