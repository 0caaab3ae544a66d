"""The pytest plugin: a target whose import hangs fails its tests instead of hanging the suite."""

import subprocess
import sys
import time
from pathlib import Path

from attack_harness import SLACK_SECONDS, write_attack

HANGS = """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
"""


def test_the_plugin_bounds_a_hanging_import(tmp_path: Path) -> None:
    path = write_attack(tmp_path, HANGS)
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]
    options = [f"--kvsched-target={path}:Attack", "--kvsched-timeout=0.5"]
    result = subprocess.run(
        [*command, *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SLACK_SECONDS + 30,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "did not return within 0.5 s" in result.stdout
    assert time.monotonic() - started < SLACK_SECONDS + 10
