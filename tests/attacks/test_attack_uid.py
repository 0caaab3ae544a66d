"""The ``uid`` containment's own mechanics, on a shell any user may run.

A host needs kvsched's Python readable by every user, which this machine may not offer (the
attacks then skip ``uid``); the jail around it is the same, and is tested here with /bin/sh.
"""

from __future__ import annotations

import os
import random
import subprocess
import time

import pytest
from attack_harness import processes_with

from kvsched.checks.targets.sandbox import Containment, Jail

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root can change user ids")


def test_a_process_of_the_uid_cannot_signal_kvsched_and_does_not_outlive_the_jail() -> None:
    jail = Jail(Containment("uid"))
    nap = f"{random.randrange(10**6, 10**7)}.5"  # a sleep no other process has: its marker
    script = (
        f"kill -TERM {os.getpid()} 2>/dev/null; echo signal=$?; "
        f"touch /etc/kvsched-planted 2>/dev/null; echo write=$?; "
        f"touch $TMPDIR/mine; echo scratch=$?; "
        f"setsid sh -c '(sleep {nap} &)' >/dev/null 2>&1 </dev/null & sleep 0.3"
    )
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", script],
            capture_output=True,
            text=True,
            preexec_fn=jail.preexec(),
            env=jail.environment(),
            timeout=30,
        )
        assert "signal=1" in done.stdout and "write=1" in done.stdout, done
        assert "scratch=0" in done.stdout, done
        assert processes_with(f"sleep {nap}"), "the daemon escaped the shell's session"
    finally:
        jail.close()
    time.sleep(0.1)
    assert not processes_with(f"sleep {nap}")
    assert not os.path.exists(jail.scratch)
    assert not os.path.exists("/etc/kvsched-planted")


def test_the_reaper_ends_the_uid_and_removes_the_scratch_folder_if_kvsched_dies() -> None:
    """kvsched's death, as its reaper sees it: the pipe closes without the word that kvsched
    cleaned up itself. The reaper then kills every process of the uid, daemons included."""
    jail = Jail(Containment("uid"))
    nap = f"{random.randrange(10**6, 10**7)}.5"
    try:
        subprocess.run(
            ["/bin/sh", "-c", f"setsid sh -c '(sleep {nap} &)' >/dev/null 2>&1 </dev/null &"],
            preexec_fn=jail.preexec(),
            env=jail.environment(),
            timeout=30,
            check=True,
        )
        time.sleep(0.3)
        assert processes_with(f"sleep {nap}"), "the daemon did not start"
        assert jail._reaper is not None and jail._reaper_pipe is not None
        os.close(jail._reaper_pipe)  # what kvsched's death does to it
        jail._reaper_pipe = None
        assert jail._reaper.wait(timeout=30) == 0
        assert not processes_with(f"sleep {nap}")
        assert not os.path.exists(jail.scratch)
    finally:
        jail.close()
