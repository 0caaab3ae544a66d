"""A subprocess started by the target does not outlive the check, in any containment."""

import time
from pathlib import Path

import pytest
from attack_harness import SANDBOXES, check_in_process, failed, processes_with, write_attack

SPAWNS = """
import subprocess, sys

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # MARK"])
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_targets_subprocesses_are_killed(
    tmp_path: Path, capsys: object, sandbox: str, marker: str
) -> None:
    path = write_attack(tmp_path, SPAWNS.replace("MARK", marker))
    failed(check_in_process(capsys, f"{path}:Attack", "--sandbox", sandbox), "REQ-2 violated")
    time.sleep(0.2)
    assert not processes_with(marker)
