"""KeyboardInterrupt in a call, and an exception whose ``__str__`` raises: verdicts, not exit 3."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

RUDE = """
class Unformattable(Exception):
    def __str__(self):
        raise RuntimeError("no text for you")

class Interrupts(Buggy):
    def schedule(self):
        raise KeyboardInterrupt

class RaisesUnformattable(Buggy):
    def update_from_output(self, output):
        raise Unformattable()
"""


def test_keyboard_interrupt_in_a_call_is_proto_1(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, RUDE)
    failed(check_in_process(capsys, f"{path}:Interrupts"), "PROTO-1", "KeyboardInterrupt")


def test_unformattable_exception_is_proto_1(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, RUDE)
    outcome = check_in_process(capsys, f"{path}:RaisesUnformattable")
    failed(outcome, "PROTO-1", "Unformattable whose text cannot be formatted")


TERMINAL = """
import sys

class Attack(Buggy):
    def schedule(self):
        sys.stderr.write("\\x1b]0;owned\\x07\\x1b[2J")
        raise ValueError("\\x1b[31mred\\x1b[0m")
"""


def test_the_targets_text_cannot_drive_the_terminal(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, TERMINAL)
    outcome = check_in_process(capsys, f"{path}:Attack")
    failed(outcome, "PROTO-1", "\\x1b[31mred")
    assert "\x1b" not in outcome.out
