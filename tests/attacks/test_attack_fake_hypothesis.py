"""A fake ``hypothesis`` planted in ``sys.modules``: the search that runs is kvsched's own."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

FAKE = """
import sys, types
fake = types.ModuleType("hypothesis")
fake.given = lambda *a, **k: (lambda f: f)
sys.modules["hypothesis"] = fake

class Attack(Buggy):
    pass
"""


def test_a_fake_hypothesis_changes_nothing(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, FAKE)
    options = ("--max-examples", "10", "--z3-requests", "0", "--budget", "60")
    outcome = check_in_process(capsys, f"{path}:Attack", *options, fast=False)
    failed(outcome, "REQ-2 violated")
