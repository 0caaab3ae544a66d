"""With ``--sandbox bwrap`` the target cannot write files (optional: skipped without bwrap)."""

import shutil
from pathlib import Path

import pytest
from attack_harness import check_in_process, failed, write_attack

WRITES = """
import os

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        with open("planted.txt", "w") as file:
            file.write("written by the target")
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_bubblewrap_keeps_the_filesystem_read_only(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, WRITES)
    outcome = check_in_process(capsys, f"{path}:Attack", "--sandbox", "bwrap")
    failed(outcome, "PROTO-1", "Read-only file system", "in bubblewrap")
    assert not (tmp_path / "planted.txt").exists()
