"""Ctrl-C or SIGTERM during a check: one line, exit 130 or 143, and the target's host is gone.

A person stops a long check with Ctrl-C; a CI runner stops a job with SIGTERM. Either ends
``kvsched check`` within about a second with one line on stderr and the shell's code for the
signal (no verdict, so never 0, and no traceback, which would read as a crash of kvsched), and the
host process running the target, which sleeps in a call meanwhile, must not outlive it: a target
left running would go on using the machine, or write after the verdict. Host processes are found
by their command line, whatever sandbox starts them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attack_harness import FAST, SLACK_SECONDS, processes_with
from waiting import SLOW, wait_for

from kvsched.cli import GRACE_SECONDS
from kvsched.spec.vocabulary import ExitCode

HOST = "kvsched.checks.targets.host"


def _hosts_of(pid: int) -> set[int]:
    """The host processes started by ``pid`` (its descendants), not other tests' hosts."""
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rpartition(")")[2].split()[1]
            )
        except (ValueError, OSError):  # not a process, or gone meanwhile
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found & set(processes_with(HOST))


@pytest.mark.parametrize(
    ("sent", "code", "line"),
    [
        (signal.SIGINT, ExitCode.INTERRUPTED, "kvsched check: interrupted (SIGINT, Ctrl-C)"),
        (signal.SIGTERM, ExitCode.TERMINATED, "kvsched check: terminated (SIGTERM)"),
    ],
)
def test_a_signal_ends_the_check_and_its_host(
    tmp_path: Path, sent: signal.Signals, code: int, line: str
) -> None:
    (tmp_path / "slow.py").write_text(SLOW, encoding="utf-8")
    command = [sys.executable, "-m", "kvsched", "check", "slow.py:Slow", "--timeout", "300"]
    process = subprocess.Popen(
        [*command, *FAST],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_for(lambda: _hosts_of(process.pid), SLACK_SECONDS), "no host started"
        time.sleep(1.0)  # into the sleeping call, past the host's start-up
        assert process.poll() is None, process.communicate()
        started = _hosts_of(process.pid)  # once kvsched is gone, a leaked host has no parent
        process.send_signal(sent)
        sent_at = time.monotonic()
        out, err = process.communicate(timeout=SLACK_SECONDS)
        seconds = time.monotonic() - sent_at
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == code, (process.returncode, out, err)
    assert seconds < GRACE_SECONDS + 1.5, seconds  # about a second, on a busy machine
    assert err.startswith(line) and err.count("\n") == 1, err
    assert "Traceback" not in err + out, (out, err)
    assert wait_for(lambda: not set(processes_with(HOST)) & started, 5.0), (
        f"the host outlived kvsched: {sorted(set(processes_with(HOST)) & started)}"
    )
