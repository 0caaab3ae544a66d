"""Flooding stdout: the output is capped, the target stopped, and the tail shown in the verdict."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

FLOOD = """
import sys

class Attack(Buggy):
    def schedule(self):
        while True:
            sys.stdout.write("spam " * 1000 + "\\n")
"""


def test_output_is_capped(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, FLOOD)
    outcome = check_in_process(capsys, f"{path}:Attack", "--output-limit", "100000")
    failed(outcome, "PROTO-1", "wrote more than 100000 bytes", "The target's stdout")
    assert "spam spam" in outcome.out
    assert len(outcome.out) < 20000
