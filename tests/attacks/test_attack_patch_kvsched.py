"""Patching kvsched's verdict, monitor, judge or builtins from the target's import."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

PATCHES = """
import builtins
from kvsched.checks.verdict import report
from kvsched.checks.monitor import runtime
from kvsched.checks.judge import allocator

report.Report.ok = property(lambda self: True)
report.Verdict.ok = property(lambda self: True)
runtime.monitor_run = lambda *args, **kwargs: None
allocator.check_allocator = lambda *args, **kwargs: None
builtins.all = lambda iterable: True

class Attack(Buggy):
    pass
"""


def test_patches_reach_only_the_host(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, PATCHES)
    failed(check_in_process(capsys, f"{path}:Attack"), "REQ-2 violated")
