"""An exception whose ``__str__`` loops, a returned object whose ``__repr__`` loops."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

LOOPS = """
class Endless(Exception):
    def __str__(self):
        while True:
            pass

class Unprintable:
    def __repr__(self):
        while True:
            pass

class RaisesEndless(Buggy):
    def schedule(self):
        raise Endless()

class ReturnsUnprintable(Buggy):
    def schedule(self):
        return Unprintable()
"""


def test_looping_exception_text_is_a_timeout_verdict(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, LOOPS)
    outcome = check_in_process(capsys, f"{path}:RaisesEndless", timeout=0.5)
    failed(outcome, "PROTO-1", "did not return within 0.5 s")


def test_a_looping_repr_is_never_called(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, LOOPS)
    outcome = check_in_process(capsys, f"{path}:ReturnsUnprintable", timeout=0.5)
    failed(outcome, "PROTO-1", "a Unprintable, not a ScheduledBatch")
