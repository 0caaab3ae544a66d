"""The pytest plugin: every invariant of a target a test, under the target's path, in JUnit too."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

MUTANTS = "kvsched.checks.mutants"


def test_pytest_plugin_turns_invariants_into_tests(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "KVSCHED_CACHE_DIR": str(cache)}
    junit = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]
    command.append(f"--junitxml={junit}")
    targets = [
        "--kvsched-target=kvsched.reference.static:StaticScheduler",
        f"--kvsched-target={MUTANTS}.batching:FinishesTwice",
    ]
    result = subprocess.run(
        [*command, *targets], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    # The reference: 20 invariants hold, BATCH-3, BATCH-5 and BATCH-6 do not apply to static
    # batching, nor PAGE-7 to a target that does not declare asynchronous scheduling, nor
    # SLOT-1 and SLOT-2 to one that declares no state slots. The mutant: REQ-2 fails, the 25
    # others do not apply or were not checked past it.
    assert "1 failed, 20 passed, 31 skipped" in result.stdout
    # Under the module's path below its import root, so the JUnit classname reads as one too.
    node = f"kvsched/checks/mutants/batching.py::kvsched[{MUTANTS}.batching:FinishesTwice]"
    assert f"FAILED {node}[continuous][REQ-2]" in result.stdout
    assert "REQ-2 violated in iteration" in result.stdout
    assert "Smallest failing workload" in result.stdout
    assert any((cache / "counterexamples").iterdir())
    assert not (tmp_path / ".kvsched").exists()  # the cache folder, not where pytest ran
    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert {case.get("classname") for case in cases} == {
        "kvsched.reference.static",
        "kvsched.checks.mutants.batching",
    }
    # Each check ran before the tests: its time is a property, not the first test's time.
    timed = [case for case in cases if case.find("properties") is not None]
    assert len(timed) == 2
    assert all(float(case.get("time", "")) < 1 for case in cases)
    for case in timed:
        [seconds] = case.iter("property")
        assert seconds.get("name") == "kvsched_check_seconds"
        assert float(seconds.get("value", "")) > 0


def test_the_plugin_loads_each_target_once(tmp_path: Path) -> None:
    """The load at collection, which names the tests, is the one the check judges: one host
    started, one import of the target (there were two, one to name the tests and one to check)."""
    root = Path(__file__).resolve().parents[2]
    learner = root / "checks" / "mutants" / "learner" / "buggy_leak.py"
    code = (
        "import sys, pytest\n"
        "from kvsched.checks.targets import remote\n"
        "loads = []\n"
        "load = remote.RemoteTarget.load\n"
        "remote.RemoteTarget.load = lambda self: loads.append(self.spec) or load(self)\n"
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'no:xdist', '-o', 'addopts=', "
        f"'--kvsched-target={learner}', '--kvsched-target={learner}', '.'])\n"
        "print('exit', int(code), 'loads', len(loads), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # the outer run's
    env["KVSCHED_CACHE_DIR"] = str(tmp_path / "cache")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        check=False, env=env,
    )  # fmt: skip
    # A leak (PAGE-3) under both policies fails; named twice, the target is still loaded once.
    assert result.stderr.split()[-4:] == ["exit", "1", "loads", "1"], result.stdout + result.stderr
