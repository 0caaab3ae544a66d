"""A subprocess started by the target does not outlive the check."""

import os
import time
from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

SPAWNS = """
import subprocess, sys

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open("child.pid", "a") as file:
            file.write(f"{child.pid}\\n")
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is already dead; only its parent (the host, now gone) could reap it.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_the_targets_subprocesses_are_killed(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, SPAWNS)
    failed(check_in_process(capsys, f"{path}:Attack"), "REQ-2 violated")
    pids = [int(line) for line in (tmp_path / "child.pid").read_text().split()]
    assert pids
    time.sleep(0.2)
    assert not [pid for pid in pids if _alive(pid)]
