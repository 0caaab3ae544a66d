"""What the grader keeps from the target: its environment, its files, the system's secrets.

A target that finds a secret can put it in the only channel it has to the grader, the verdict
(and with it ``--json`` and the JUnit file): each target here raises an exception whose text is
whatever it could read. Each runs under every containment this machine has (the test id names
it); those it lacks skip, saying why. What only a sandbox keeps from the target (other
processes' environments, the grader's files) is tested under ``CONTAINED`` alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_harness import CONTAINED, FAST, SANDBOXES, readable_folder, write_attack

SECRET = "s3cret-" + os.urandom(6).hex()
"""The grader's token, unguessable, so that finding it anywhere means it leaked."""


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = readable_folder(monkeypatch)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _check(folder: Path, sandbox: str, *extra: str) -> str:
    """Everything ``kvsched check`` tells the grader about the attack: the verdict on stdout,
    stderr, the JSON report and the JUnit file; the check must end in a finding."""
    junit, report = folder / "junit.xml", folder / "report.json"
    command = [sys.executable, "-m", "kvsched", "check", "attack.py:Attack", *FAST, *extra]
    command += ["--sandbox", sandbox, "--timeout", "10"]
    done, json_done = (
        subprocess.run(
            [*command, *output],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "KVSCHED_TEST_SECRET": SECRET},
            check=False,
        )
        for output in (["--junit-xml", str(junit)], ["--json"])
    )
    report.write_text(json_done.stdout, encoding="utf-8")
    for run in (done, json_done):
        assert run.returncode == 1, run  # the bug was found; never 0
    assert "PROTO-1" in done.stdout, done  # the target's exception, with what it read, is shown
    outputs = (done.stdout, done.stderr, json_done.stdout, json_done.stderr, junit.read_text())
    return "\n".join(outputs)


ENVIRONMENT = """
import os

class Attack(Buggy):
    def schedule(self):
        raise RuntimeError("the environment: " + repr(dict(os.environ)))
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_kvscheds_environment_is_not_the_targets(folder: Path, sandbox: str) -> None:
    write_attack(folder, ENVIRONMENT)
    said = _check(folder, sandbox)
    assert "the environment: {" in said  # the target did show what it has
    assert SECRET not in said


PROCESSES = """
import os

class Attack(Buggy):
    def schedule(self):
        seen = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/environ", "rb") as file:
                    seen.append(file.read().decode(errors="replace"))
            except OSError:
                pass
        raise RuntimeError(f"read {len(seen)} environments: " + " ".join(seen))
"""


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_contained_target_reads_no_process_environment(folder: Path, sandbox: str) -> None:
    """Without a sandbox kvsched's own /proc/PID/environ is the target's to read."""
    write_attack(folder, PROCESSES)
    said = _check(folder, sandbox)
    assert "environments: " in said
    assert SECRET not in said


FILES = """
class Attack(Buggy):
    def schedule(self):
        found = []
        for path in {paths!r}:
            try:
                with open(path, errors="replace") as file:
                    found.append(path + " opened: " + file.read())
            except OSError as error:
                found.append(path + ": " + type(error).__name__)
        raise RuntimeError("; ".join(found))
"""


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_contained_target_reads_none_of_the_graders_files(folder: Path, sandbox: str) -> None:
    """A 0600 file of the grader's in a folder of its own, one beside the submission, and the
    system's password hashes: the target can open none of them."""
    private = Path(tempfile.mkdtemp(prefix="kvsched-grader-"))
    try:
        grades = private / "grades.csv"
        beside = folder / "grades.csv"
        for path in (grades, beside):
            path.write_text(f"alice,{SECRET}\n", encoding="utf-8")
            path.chmod(0o600)
        paths = [str(grades), str(beside), "/etc/shadow"]
        write_attack(folder, FILES.format(paths=paths))
        said = _check(folder, sandbox)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert "/etc/shadow: " in said, said  # it tried, and was refused
    assert SECRET not in said
    assert " opened: " not in said, said
