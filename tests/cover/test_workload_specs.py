"""Workload handling: one spec form for every command, given files shrunk, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvsched import cli
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.search.profiles import hypothesis_home
from kvsched.checks.targets.load import load_target
from kvsched.reference.families import generate, workload_from_spec
from kvsched.spec.workload import WorkloadError, workload_to_json

LEAK = "kvsched.checks.mutants.sized:LeakInACrowd"


def test_a_family_spec_is_a_workload_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert workload_from_spec("family:bursty-short-tight:30:2") == generate(
        "bursty-short-tight", 30, 2
    )
    assert cli.main(["replay", "family:bursty-short-tight:30", "--timeline", "none"]) == 0
    assert "bursty-short-tight-n30-s0: 30 requests" in capsys.readouterr().out
    argv = ["check", LEAK, "--workload", "family:bursty-short-tight:100:1", "--no-hypothesis"]
    saved = str(tmp_path / "saved")
    assert cli.main([*argv, "--z3-requests", "0", "--save-dir", saved]) == 1
    assert "Smallest failing workload (the given workload, shrunk)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("family:nope:5", "unknown workload family 'nope'"),
        ("family:bursty-short-tight", "write family:NAME:SIZE"),
        ("family:bursty-short-tight:x", "'x' is not a non-negative integer"),
    ],
)
def test_a_bad_family_spec_is_invalid_input(spec: str, words: str) -> None:
    with pytest.raises(WorkloadError, match=words):
        workload_from_spec(spec)
    assert cli.main(["replay", spec]) == 2


def test_a_violation_on_a_given_file_is_shrunk(tmp_path: Path) -> None:
    given = tmp_path / "hundred.json"
    given.write_text(json.dumps(workload_to_json(generate("bursty-short-tight", 100, 1))))
    options = CheckOptions(
        workload=workload_from_spec(str(given)),
        workload_file=str(given),
        hypothesis=False,
        teaching_trace=False,
        proof_requests=0,
    )
    (verdict,) = check_target(load_target(LEAK), options).verdicts
    assert verdict.finding is not None and verdict.finding.invariant == "PAGE-3"
    assert verdict.counterexample is not None
    assert verdict.counterexample.found_by == "the given workload, shrunk"
    assert len(verdict.counterexample.workload.requests) == 5  # the crowd the leak needs


def test_hypothesis_files_go_to_the_kvsched_cache(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    env["KVSCHED_CACHE_DIR"] = str(tmp_path / "cache")
    here = tmp_path / "here"
    here.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "kvsched", "check", "kvsched.reference.static:StaticScheduler",
         "--max-examples", "3", "--z3-requests", "0"],
        cwd=here, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (here / ".hypothesis").exists()
    assert (tmp_path / "cache" / "hypothesis").is_dir()


def test_hypothesis_storage_directory_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", "/somewhere")
    assert hypothesis_home() is None
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY")
    monkeypatch.setenv("KVSCHED_CACHE_DIR", "/cache")
    assert hypothesis_home() == Path("/cache/hypothesis")


def test_synth_says_when_it_saved_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["synth", "iteration-gap", "--requests", "3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "add --out FILE to write the workload file" in out
