"""``kvsched report --policies NAME=file.py:Class`` runs the class in a host process, as check does.

A class that hangs in ``schedule()`` meets the per-call deadline: its run stops there, the report
is still written with that run marked incomplete, and the command exits 1 naming why, well
within the deadline plus the slack. A class that exits while being imported, or that tries to
write a file into kvsched's own process's state, cannot end or change kvsched: exit 1, never a
hang, exit 0 or a crash (3).
"""

from __future__ import annotations

import time
from pathlib import Path

from attack_harness import SLACK_SECONDS, write_attack

from kvsched.cli import main

HANGS = """
class Attack(Buggy):
    def schedule(self):
        if len(self.finished_ids) >= 1:
            while True:
                pass
        return super().schedule()

    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        self.finished_ids = getattr(self, "finished_ids", ()) + outcome.finished
        return outcome

    finished_ids = ()
"""


def _report(tmp_path: Path, spec: str, timeout: float = 1.0) -> tuple[int, float]:
    started = time.monotonic()
    argv = ["report", "--policies", f"continuous,mine={spec}", "--out", str(tmp_path / "out")]
    code = main([*argv, "--timeout", str(timeout), "--budget", "60", "--no-plots"])
    seconds = time.monotonic() - started
    assert seconds < timeout + SLACK_SECONDS, seconds
    return code, seconds


def test_a_class_hanging_in_a_report_ends_its_run_not_the_report(
    tmp_path: Path, capsys: object
) -> None:
    path = write_attack(tmp_path, HANGS)
    code, _ = _report(tmp_path, f"{path}:Attack")
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert code == 1, err
    assert "mine on teaching: the scheduler failed in iteration" in err
    assert "schedule() did not return within 1 s" in err
    markdown = (tmp_path / "out" / "teaching" / "report.md").read_text()
    assert "did not complete" in markdown or "failed in iteration" in markdown


def test_a_class_exiting_at_import_is_a_finding_not_our_exit(
    tmp_path: Path, capsys: object
) -> None:
    path = write_attack(tmp_path, "import os\nos._exit(0)\nclass Attack(Buggy): pass\n")
    code, _ = _report(tmp_path, f"{path}:Attack")
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert code == 1, err
    assert "PROTO-1" in err and "exited with code 0 during importing" in err
    assert not (tmp_path / "out").exists()


def test_a_class_is_never_imported_into_kvscheds_process(tmp_path: Path, capsys: object) -> None:
    # Importing it would patch kvsched's engine here; hosted, only the host's copy changes.
    planted = """
    import kvsched.reference.engine as engine
    engine.iteration_bound = lambda workload: 0
    class Attack(Buggy): pass
    """
    path = write_attack(tmp_path, planted)
    code, _ = _report(tmp_path, f"{path}:Attack")
    from kvsched.reference import engine

    assert engine.iteration_bound.__name__ == "iteration_bound"
    assert code in (0, 1), capsys.readouterr()  # type: ignore[attr-defined]
