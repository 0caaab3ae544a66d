"""A target that allocates without end meets the memory limit: a failing verdict."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

HOG = """
class Attack(Buggy):
    def schedule(self):
        hoard = []
        while True:
            hoard.append(bytearray(1 << 30))  # far over the limit at once: no time spent filling
"""


def test_memory_is_limited(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, HOG)
    outcome = check_in_process(capsys, f"{path}:Attack", "--memory-mb", "256", timeout=5.0)
    failed(outcome, "PROTO-1", "MemoryError")
