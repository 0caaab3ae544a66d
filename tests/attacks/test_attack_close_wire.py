"""Closing kvsched's pipes and running on: a failing verdict, not a kvsched waiting forever."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

CLOSES = """
import os

class Attack(Buggy):
    def schedule(self):
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        while True:
            pass
"""


def test_a_closed_wire_is_a_failing_verdict(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, CLOSES)
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=5.0)
    failed(outcome, "PROTO-1", "closed kvsched's wire")
