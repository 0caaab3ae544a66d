"""Writing on kvsched's wire from the target: a forged answer or garbage is a failing verdict."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

FORGE = """
import os

def _forge():
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), b"\\x7f\\xff\\xff\\xffgarbage")
        except OSError:
            pass

class Attack(Buggy):
    def schedule(self):
        _forge()
        return super().schedule()
"""


def test_garbage_on_the_wire_is_a_failing_verdict(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, FORGE)
    failed(check_in_process(capsys, f"{path}:Attack"), "PROTO-1")
