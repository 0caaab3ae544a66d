"""The target's process cannot reach kvsched's: its imports and its signals.

Each attack runs under every containment this machine has (the test id names it: ``bwrap``,
``uid``, ``none``); those it lacks skip, saying why. What holds only inside a sandbox is tested
under ``CONTAINED`` alone, and what kvsched promises without one is tested under ``none``.
Daemons, a killed kvsched, writes and the verdict's words: test_attack_leftovers.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from attack_harness import (
    CONTAINED,
    SANDBOXES,
    check_program,
    failed,
    write_attack,
)

from kvsched.checks.targets import sandbox as sandboxes

LATE = '''
from dataclasses import replace
from kvsched.reference import ContinuousScheduler

class Late(ContinuousScheduler):
    """Finishes requests twice (REQ-2) only past 12 arrivals: the teaching trace's 9 pass, so
    only the search, which kvsched imports after the target is loaded, can find it."""

    def __init__(self, limits):
        super().__init__(limits)
        self._seen, self._last = 0, ()

    def add_request(self, request):
        self._seen += 1
        super().add_request(request)

    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        if self._seen <= 12:
            return outcome
        again, self._last = self._last, outcome.finished
        return replace(outcome, finished=outcome.finished + again)
'''

SHIM = """
import os
# The working folder: the first entry of kvsched's path under ``python -m kvsched``. (Planting in
# every entry would, uncontained and as root, overwrite the real Hypothesis.)
try:
    os.makedirs("hypothesis", exist_ok=True)
    with open(os.path.join("hypothesis", "__init__.py"), "w") as file:
        file.write("def given(*a, **k):\\n    return lambda f: lambda *x, **y: None\\n")
except OSError:
    pass
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_planted_hypothesis_is_never_imported(tmp_path: Path, sandbox: str) -> None:
    """The target plants ``hypothesis/`` in the working folder before kvsched imports it."""
    (tmp_path / "late.py").write_text(SHIM + LATE, encoding="utf-8")
    search = ("--max-examples", "100", "--z3-requests", "0", "--budget", "60")
    command = [sys.executable, "-m", "kvsched", "check", "late.py:Late", "--sandbox", sandbox]
    result = subprocess.run(
        [*command, *search], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result
    assert "REQ-2 violated" in result.stdout, result
    planted = (tmp_path / "hypothesis").exists()
    assert planted == (sandbox == "none"), "only an uncontained target can plant it"


PROBE = """
import json, sys
sys.path[:0] = [{harness!r}]
from kvsched.checks.targets import process
from kvsched.cli import main
started = []
boot = process.HostProcess.__init__
def init(self, *args, **kwargs):
    boot(self, *args, **kwargs)
    started.append(set(sys.modules))
process.HostProcess.__init__ = init
code = main(["check", *sys.argv[1:]])
# A built-in or frozen module has no file a target could plant.
late = set(sys.modules) - started[0] - set(sys.builtin_module_names)
late = [name for name in late if getattr(sys.modules[name], "__file__", None)]
print(json.dumps([code, sorted(late)]), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "target, code",
    [("late.py:Late", 1), ("kvsched.reference:ContinuousScheduler", 0), ("leak.py", 1)],
    ids=["found-by-the-search", "passing", "learner"],
)
def test_kvsched_imports_nothing_once_the_target_runs(
    tmp_path: Path, target: str, code: int
) -> None:
    """Every module a check needs is imported before the host starts: a fresh kvsched process
    that finds, passes and judges a learner, with every output, imports none after."""
    (tmp_path / "late.py").write_text(LATE, encoding="utf-8")
    learner = Path(sandboxes.__file__).parents[1] / "mutants" / "learner" / "buggy_leak.py"
    (tmp_path / "leak.py").write_text(learner.read_text(encoding="utf-8"), encoding="utf-8")
    probe = PROBE.format(harness=str(Path(__file__).parent))
    options = ["--max-examples", "60", "--json", "--junit-xml", "j.xml", "--z3-requests", "2"]
    result = subprocess.run(
        [sys.executable, "-c", probe, target, *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    exit_code, late = json.loads(result.stderr.strip().splitlines()[-1])
    assert exit_code == code, result
    assert late == [], f"imported after the target started: {late}"


SIGNALS = """
import os, signal

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        for pid in (os.getppid(), 1, -1 if {everyone} else 0):
            try:
                os.kill(pid, signal.{name}) if pid else None
            except OSError:
                pass
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGSTOP", "SIGKILL"])
@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_contained_target_cannot_signal_kvsched(tmp_path: Path, sandbox: str, name: str) -> None:
    write_attack(tmp_path, SIGNALS.format(name=name, everyone=name != "SIGSTOP"))
    failed(check_program(tmp_path, "attack.py:Attack", "--sandbox", sandbox), "REQ-2 violated")


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_an_uncontained_targets_signal_is_never_a_pass(
    tmp_path: Path, name: str, code: int
) -> None:
    """Without a sandbox the signal arrives; kvsched says it was interrupted, never exit 0."""
    write_attack(tmp_path, SIGNALS.format(name=name, everyone=False))
    outcome = check_program(tmp_path, "attack.py:Attack", "--sandbox", "none")
    assert outcome.code == code, outcome
    assert "Traceback" not in outcome.err
