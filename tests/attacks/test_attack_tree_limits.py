"""The limits bound the target's whole tree of processes, not each process on its own.

RLIMIT_AS bounds one process and RLIMIT_FSIZE one file: a target that forks, or spreads its
writes over many files, would pass under both. Each attack runs under every containment this
machine has (the test id names it); those it lacks skip, saying why.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_harness import (
    CONTAINED,
    SANDBOXES,
    check_in_process,
    failed,
    processes_with,
    readable_folder,
    write_attack,
)

from kvsched.checks.targets.sandbox import UID_PROCESSES


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = readable_folder(monkeypatch)
    yield path
    shutil.rmtree(path, ignore_errors=True)


FORKS = """
import subprocess, sys, time

HOLD = "import time; hoard = b'x' * (200 << 20); time.sleep(60)"

class Attack(Buggy):
    def schedule(self):
        # Six fresh small interpreters, each under the per-process limit with 200 MiB written.
        for _ in range(6):
            subprocess.Popen([sys.executable, "-I", "-S", "-c", HOLD])
        time.sleep(60)
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_memory_limit_bounds_every_process_together(
    folder: Path, sandbox: str, capsys: object
) -> None:
    """1,200 MiB in six children under --memory-mb 256: the tree is stopped, by name of the
    limit, before the call's own deadline would have ended it."""
    write_attack(folder, FORKS)
    outcome = check_in_process(
        capsys, "attack.py:Attack", "--memory-mb", "256", "--sandbox", sandbox, timeout=20.0
    )
    failed(outcome, "PROTO-1", "--memory-mb")
    assert outcome.seconds < 20.0, outcome


FILL = """
import os, time

WROTE = []

class Attack(Buggy):
    def schedule(self):
        if WROTE:  # the shrinker's replays: the same failure, at once
            raise RuntimeError(f"wrote {WROTE[0]} bytes")
        written = 0
        chunk = b"x" * (1 << 20)
        for number in range(16):
            try:
                with open(os.path.join(os.environ["TMPDIR"], f"fill{number}"), "wb") as file:
                    for _ in range(63):  # under the 64 MiB cap on one file
                        file.write(chunk)
                        written += len(chunk)
            except OSError:
                pass
        WROTE.append(written)
        time.sleep(2)  # held, not removed at once
        raise RuntimeError(f"wrote {written} bytes")
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_scratch_folder_is_bounded_whatever_the_files(
    folder: Path, sandbox: str, capsys: object
) -> None:
    """16 files of 63 MiB: under bubblewrap the tmpfs is full at the limit; elsewhere kvsched,
    measuring the folder while it waits, ends the target by name of the limit."""
    write_attack(folder, FILL)
    outcome = check_in_process(
        capsys, "attack.py:Attack", "--scratch-mb", "128", "--sandbox", sandbox, timeout=20.0
    )
    assert outcome.code == 1, outcome
    if sandbox == "bwrap":
        wrote = re.search(r"wrote (\d+) bytes", outcome.out)
        assert wrote is not None, outcome
        assert int(wrote[1]) <= 128 << 20, outcome
    else:
        failed(outcome, "PROTO-1", "--scratch-mb")


FORK_BOMB = """
import os, time

class Attack(Buggy):
    def schedule(self):
        forked = 0
        for _ in range({tries}):
            try:
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", "30", {marker!r}])
            except OSError:
                break
            forked += 1
        raise RuntimeError(f"forked {{forked}} processes")
"""


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_fork_bomb_stops_at_the_process_limit(
    folder: Path, sandbox: str, marker: str, capsys: object
) -> None:
    """Four times the limit asked for: the forks past it fail, and none outlives the check.
    (Uncontained, as root, nothing bounds it: that kind is not run here.)"""
    write_attack(folder, FORK_BOMB.format(tries=4 * UID_PROCESSES, marker=marker))
    outcome = check_in_process(capsys, "attack.py:Attack", "--sandbox", sandbox, timeout=20.0)
    forked = re.search(r"forked (\d+) processes", outcome.out)
    assert outcome.code == 1 and forked is not None, outcome
    assert int(forked[1]) < UID_PROCESSES, outcome
    assert not processes_with(marker)
