"""An int subclass whose comparisons always agree, as ``free_pages``: it cannot cross the wire."""

from dataclasses import replace
from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

LYING_INT = """
from dataclasses import replace

class Agreeable(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__

class Attack(Buggy):
    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        return replace(outcome, free_pages=Agreeable(outcome.free_pages))
"""


def test_an_int_subclass_is_proto_1(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, LYING_INT)
    failed(check_in_process(capsys, f"{path}:Attack"), "PROTO-1", "not plain data")
    assert replace  # the dataclasses the target uses are kvsched's spec types
