"""``os._exit(0)`` while being imported: the host dies, kvsched gives a failing verdict."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack


def test_exit_at_import_is_a_failing_verdict(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, "import os\nos._exit(0)\nclass Attack(Buggy): pass\n")
    outcome = check_in_process(capsys, f"{path}:Attack")
    failed(outcome, "PROTO-1", "exited with code 0 during importing")
