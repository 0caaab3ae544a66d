"""``os._exit(0)`` registered with atexit, and a thread that exits once the main thread ends."""

import os
from pathlib import Path

from attack_harness import check_program, failed, write_attack

TRICKS = """
import atexit, os, threading
atexit.register(lambda: os._exit(0))

def exit_when_main_ends():
    threading.main_thread().join()
    os._exit(0)

threading.Thread(target=exit_when_main_ends).start()

class Attack(Buggy):
    pass
"""


def test_exits_after_the_check_do_not_fake_a_pass(tmp_path: Path) -> None:
    path = write_attack(tmp_path, TRICKS)
    report = tmp_path / "report.xml"
    outcome = check_program(tmp_path, f"{path}:Attack", "--junit-xml", str(report))
    failed(outcome, "REQ-2 violated")
    assert "<failure" in report.read_text()
    assert os.path.exists(report)
