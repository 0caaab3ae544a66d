"""``kvsched check`` and ``kvsched mutants``, end to end (the pytest plugin: test_pytest_plugin.py).

Most tests call :func:`kvsched.cli.main` in this process; the ones about hanging or exiting
targets and the console script run a real subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import write_log
from kvsched.checks.mutants.zoo import ZOO
from kvsched.cli import main
from kvsched.reference import ContinuousScheduler, StaticScheduler, run
from kvsched.spec.invariants import BY_ID, CATALOGUE
from kvsched.spec.teaching import load_teaching_trace

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = "kvsched.checks.mutants"
EXAMPLES = ROOT / "examples" / "learner"
BUGGY = ROOT / "checks" / "mutants" / "learner"  # the buggy solutions, one copy
QUICK = ["--max-examples", "20"]


def kvsched(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "import sys; from kvsched.cli import main; sys.exit(main())"]
    return subprocess.run(
        [*command, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_reference_schedulers_pass(
    policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = f"kvsched.reference.{policy}:{policy.capitalize()}Scheduler"
    assert main(["check", spec, "--save-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "every invariant holds" in out
    assert "Hypothesis, 100 examples (ci)" in out  # the ci profile, as the table says
    assert "Z3 induction, all iterations (5 requests)" in out
    assert "violated" not in out


def test_z3_is_cited_only_for_the_modelled_reference_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subclass = tmp_path / "mine.py"
    subclass.write_text(
        "from kvsched.reference import ContinuousScheduler\n"
        "class Mine(ContinuousScheduler):\n    pass\n"
    )
    assert main(["check", f"{subclass}:Mine", *QUICK]) == 0
    out = capsys.readouterr().out
    assert "every invariant holds" in out
    assert "Z3" not in out  # the proofs are about the reference's code, not this class


def test_a_learner_bug_exits_1_saves_the_workload_and_replays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = str(BUGGY / "buggy_leak.py")
    save = tmp_path / "saved"
    assert main(["check", target, "--policy", "static", "--save-dir", str(save), *QUICK]) == 1
    out = capsys.readouterr().out
    assert "PAGE-3 violated in iteration 1" in out
    assert "Smallest failing workload (the teaching trace, shrunk)" in out
    [saved] = save.iterdir()
    assert f"kvsched check {target} --workload {saved} --policy static" in out
    assert main(["check", target, "--policy", "static", "--workload", str(saved), *QUICK]) == 1
    replayed = capsys.readouterr().out
    assert "PAGE-3 violated in iteration 1" in replayed
    assert f"Workload file: {saved}." in replayed
    assert main(["replay", str(saved), "--timeline", "none"]) == 0


def test_json_and_junit_xml_for_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "kvsched.xml"
    target = f"{MUTANTS}.batching:TwoTokensInOneIteration"
    argv = ["check", target, "--json", "--junit-xml", str(junit), "--save-dir", str(tmp_path)]
    assert main(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["exit_code"] == 1 and not report["ok"]
    [verdict] = report["verdicts"]
    statuses = {row["id"]: row["verdict"] for row in verdict["invariants"]}
    assert statuses["DEC-1"] == "violated"
    assert statuses["BATCH-2"] == "not applicable"
    assert verdict["finding"]["invariant"] == "DEC-1"
    assert verdict["counterexample"]["workload"]["format"] == 1
    root = ElementTree.parse(junit).getroot()
    suites = root.findall("testsuite")
    assert [s.get("failures") for s in suites] == ["1"]
    # <testsuites> carries the totals and the check's time, as JUnit readers expect.
    assert (root.get("tests"), root.get("failures")) == (str(len(CATALOGUE)), "1")
    assert root.get("skipped") == str(len(CATALOGUE) - 1)
    assert float(root.get("time", "")) == report["seconds"] == float(suites[0].get("time", ""))
    # Every invariant but the violated one is skipped: BATCH-2 does not constrain continuous
    # batching, the rest were not checked past the violation.
    assert suites[0].get("skipped") == str(len(CATALOGUE) - 1)
    failed = [c.get("name") for c in suites[0].iter("testcase") if c.find("failure") is not None]
    assert failed == [f"DEC-1 {BY_ID['DEC-1'].title}"]


def test_event_logs_are_checked_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean.jsonl"
    write_log(run(load_teaching_trace(), ContinuousScheduler, "continuous"), clean)
    assert main(["check", str(clean)]) == 0
    assert "monitor over a recorded log of 88 iterations" in capsys.readouterr().out
    finished_twice = tmp_path / "twice.jsonl"
    lines = clean.read_text().splitlines()
    event = json.loads(lines[20])
    event["finished"] = [*event["finished"], "a"]  # 'a' finished in iteration 14
    lines[20] = json.dumps(event)
    finished_twice.write_text("\n".join(lines) + "\n")
    assert main(["check", str(finished_twice), "--save-dir", str(tmp_path)]) == 1
    assert "REQ-2 violated in iteration 20" in capsys.readouterr().out


def test_an_event_log_is_checked_without_asking_for_a_jail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log's check runs no target code, so it starts no jailed Python to learn which
    containment a host would get (a probe that cost more CPU than checking a short log)."""
    from kvsched.checks.targets import confinement

    def no_jail(sandbox: str) -> None:
        raise AssertionError(f"asked for a {sandbox!r} jail")

    monkeypatch.setattr(confinement, "contain", no_jail)
    clean = tmp_path / "clean.jsonl"
    write_log(run(load_teaching_trace(), ContinuousScheduler, "continuous"), clean)
    assert main(["check", str(clean), "--sandbox", "bwrap"]) == 0
    capsys.readouterr()
    spec = "kvsched.reference.continuous:ContinuousScheduler"  # a class's check asks first
    assert main(["check", spec, "--sandbox", "bwrap"]) == 3
    assert "asked for a 'bwrap' jail" in capsys.readouterr().err


def test_bad_usage_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    malformed = tmp_path / "bad.jsonl"
    malformed.write_text('{"type": "header"}\n')
    log = tmp_path / "static.jsonl"
    write_log(run(load_teaching_trace(), StaticScheduler, "static"), log)
    bad_workload = tmp_path / "bad.json"
    bad_workload.write_text("{}")
    cases = [
        (["check", "kvsched.reference.pool:PagePool"], "does not implement the scheduler protocol"),
        (["check", str(malformed)], "line 1 (header): missing field 'format'"),
        (["check", str(log), "--policy", "continuous"], "declares policy 'static'"),
        (["check", str(EXAMPLES / "correct.py"), "--workload", str(bad_workload)], "missing"),
        (["check", str(EXAMPLES / "correct.py"), "--timeout", "0"], "--timeout must be"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        assert words in capsys.readouterr().err, argv


RUDE = """
import sys
from kvsched.reference import ContinuousScheduler

class Exits(ContinuousScheduler):
    def schedule(self):
        sys.exit(3)

class Interrupts(ContinuousScheduler):
    def update_from_output(self, output):
        raise GeneratorExit("not an Exception")
"""


def test_a_target_exiting_or_raising_base_exceptions_is_proto_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rude = tmp_path / "rude.py"
    rude.write_text(RUDE)
    for name, words in (
        ("Exits", "called sys.exit(3)"),
        ("Interrupts", "GeneratorExit: not an Exception"),
    ):
        assert main(["check", f"{rude}:{name}", "--save-dir", str(tmp_path)]) == 1
        out = capsys.readouterr().out
        assert "PROTO-1 violated in iteration 1" in out
        assert words in out


def test_a_target_whose_import_hangs_gets_a_timeout_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its code ran and did not answer: a misbehaving target, judged like a hang in a call.
    slow = tmp_path / "slow_import.py"
    slow.write_text("while True:\n    pass\n")
    assert main(["check", f"{slow}:Anything", "--timeout", "0.2"]) == 1
    assert f"importing {slow}:Anything did not return within 0.2 s" in capsys.readouterr().out


HANGS_UNINTERRUPTIBLY = """
from kvsched.reference import ContinuousScheduler

class Stubborn(ContinuousScheduler):
    def schedule(self):
        while True:
            try:
                while True:
                    pass
            except BaseException:  # swallows even the deadline's interrupt
                pass

class Exits(ContinuousScheduler):
    def schedule(self):
        import os
        os._exit(7)
"""


def test_hanging_or_exiting_targets_get_a_verdict_not_a_hung_kvsched(tmp_path: Path) -> None:
    source = tmp_path / "nasty.py"
    source.write_text(HANGS_UNINTERRUPTIBLY)
    hangs = kvsched("check", f"{MUTANTS}.hostile:HangsInSchedule", "--timeout", "0.3", cwd=tmp_path)
    assert hangs.returncode == 1, hangs.stderr
    assert "schedule() in iteration 1 on workload 'teaching'" in hangs.stdout
    assert "did not return within 0.3 s" in hangs.stdout
    stubborn = kvsched("check", f"{source}:Stubborn", "--timeout", "0.3", cwd=tmp_path)
    assert stubborn.returncode == 1, stubborn.stderr
    assert "schedule() in iteration 1 on workload 'teaching'" in stubborn.stdout
    assert "did not return within 0.3 s" in stubborn.stdout
    exits = kvsched("check", f"{source}:Exits", cwd=tmp_path)
    assert exits.returncode == 1, exits.stderr
    assert "the target's process exited with code 7 during schedule() in iteration 1" in (
        exits.stdout
    )


# What a plain ``pip install .`` ships: the package folders and the files the build reads.
SOURCES = ("pyproject.toml", "README.md", "cli", "spec", "reference", "checks", "reports")


@pytest.mark.slow
def test_kvsched_mutants_runs_from_a_plain_install_outside_the_repository(tmp_path: Path) -> None:
    # A copy of the sources, so the build writes nothing into the checkout; no index, no download.
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    installed = subprocess.run(
        [*pip, "--no-index", "--target", str(site), str(source)], capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def installed_kvsched(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kvsched", *argv], cwd=elsewhere, env=env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip

    where = installed_kvsched("--help")
    assert where.returncode == 0, where.stderr
    origin = subprocess.run(
        [sys.executable, "-c", "import kvsched; print(kvsched.__file__)"], cwd=elsewhere, env=env,
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert Path(origin.strip()).is_relative_to(site), origin
    result = installed_kvsched("mutants")
    assert result.returncode == 0, result.stdout + result.stderr
    # The table folds to fit 100 columns: a row's first line ends in its verdict and seconds.
    total = len(re.findall(r"\byes\s+\d+\.\d\d$", result.stdout, flags=re.MULTILINE))
    assert total == len(ZOO)
    assert f"mutation score: {total}/{total} mutants caught with the right invariant id" in (
        result.stdout
    )
    missing = installed_kvsched("mutants", "--zoo", "no_such_zoo.py")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "no_such_zoo.py: no such file" in missing.stderr
