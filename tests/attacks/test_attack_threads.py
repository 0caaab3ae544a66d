"""Non-daemon threads started at import and in a call cannot keep kvsched alive."""

from pathlib import Path

from attack_harness import check_program, failed, write_attack

THREADS = """
import threading, time

def forever():
    while True:
        time.sleep(1)

threading.Thread(target=forever).start()

class Attack(Buggy):
    def schedule(self):
        threading.Thread(target=forever).start()
        return super().schedule()
"""


def test_threads_do_not_hang_kvsched(tmp_path: Path) -> None:
    path = write_attack(tmp_path, THREADS)
    failed(check_program(tmp_path, f"{path}:Attack"), "REQ-2 violated")
