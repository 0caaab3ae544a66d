"""Attacks on what a pass rests on: a forged description, a missing function, a starved search.

Each would have read as a pass: kvsched believed what the target's process said about the
target, and too little evidence was a clean verdict. Now what is judged is kvsched's own reading,
and a pass needs the profile's minimum of evidence, else the check is INCONCLUSIVE (exit 4).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from attack_harness import SANDBOXES, check_in_process, failed, write_attack

from kvsched.spec.vocabulary import ExitCode

# The host's answer pipe is named on its command line (sys.argv[-3]); the forger writes a
# well-formed answer to kvsched's ``load`` on it, ahead of the host's own.
FORGE = """
import os, struct, sys
import msgspec

def _forge(description):
    payload = msgspec.msgpack.encode(["ok", description])
    try:
        os.write(int(sys.argv[-3]), struct.pack(">I", len(payload)) + payload)
    except (OSError, ValueError, IndexError):
        pass

_forge({description})

def allocate_kv_pages(tokens, page_size=16):
    pages = -(-tokens // page_size)
    capacity = pages * page_size
    return {"pages": pages, "capacity": capacity, "wastedSlots": capacity - tokens}

def schedule_iteration(state, limits, policy):
    for request in state["waiting"]:  # admits everyone, pages for nobody: PAGE-1
        request["generated"] += 1
        state["running"].append(request)
    state["waiting"] = []
    return state
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize(
    "description",
    [
        '["learner", "", None]',  # "a learner": true, and sent before the host's own answer
        '["scheduler", "", None]',  # not what kvsched reads in the file
    ],
)
def test_a_forged_description_is_a_finding(
    tmp_path: Path, capsys: object, sandbox: str, description: str
) -> None:
    path = tmp_path / "solution.py"
    path.write_text(FORGE.replace("{description}", description))
    outcome = check_in_process(capsys, str(path), "--sandbox", sandbox, "--json", timeout=2.0)
    assert outcome.code == ExitCode.FINDING, outcome
    document = json.loads(outcome.out)
    [verdict] = document["verdicts"]  # something was judged, and it failed on the forgery
    assert verdict["finding"]["invariant"] == "PROTO-1"
    assert "the target's process" in verdict["finding"]["message"]


CORRECT = Path(__file__).parents[2] / "examples" / "learner" / "correct.py"
MISSPELLED = CORRECT.read_text().replace("def schedule_iteration(", "def schedule_iteratoin(")


def test_a_missing_function_is_inconclusive_under_grade(tmp_path: Path, capsys: object) -> None:
    path = tmp_path / "solution.py"
    path.write_text(MISSPELLED)
    junit = tmp_path / "verdict.xml"
    outcome = check_in_process(
        capsys, str(path), "--grade", "--policy", "continuous", "--junit-xml", str(junit)
    )
    assert outcome.code == ExitCode.INCONCLUSIVE, outcome
    assert outcome.out.startswith("INCONCLUSIVE  ")
    assert "defines no schedule_iteration" in outcome.out
    root = ElementTree.parse(junit).getroot()
    assert root.get("errors") == "1"


def test_a_missing_function_fails_in_the_pytest_plugin(tmp_path: Path) -> None:
    path = tmp_path / "solution.py"
    path.write_text(MISSPELLED)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, f"--kvsched-target={path}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert " passed" not in result.stdout.splitlines()[-1], result.stdout
    assert "INCONCLUSIVE" in result.stdout


# A scheduler with a real bug past the fixed workloads' reach would need Hypothesis to find it;
# this one sleeps in every call (well under the per-call limit, so no hang is found) until three
# quarters of the budget are gone, so that the search would start no example. However it ends,
# it is never a pass on thin evidence.
STARVE = """
import time
from kvsched.reference import ContinuousScheduler

_SLOW_UNTIL = time.monotonic() + {slow}

class Attack(ContinuousScheduler):
    def schedule(self):
        if time.monotonic() < _SLOW_UNTIL:
            time.sleep(0.25)
        return super().schedule()
"""


def test_a_starved_search_is_never_a_pass(tmp_path: Path, capsys: object) -> None:
    budget = 16.0
    path = write_attack(tmp_path, STARVE.replace("{slow}", str(0.75 * budget)))
    outcome = check_in_process(
        capsys,
        f"{path}:Attack",
        "--budget",
        str(budget),
        "--z3-requests",
        "0",
        "--json",
        timeout=2.0,  # the sleep stays far under it on a loaded machine: no hang is found
        fast=False,
    )
    document = json.loads(outcome.out)
    assert outcome.code in (ExitCode.OK, ExitCode.INCONCLUSIVE), outcome
    if outcome.code == ExitCode.OK:  # then on the profile's minimum at least
        assert all(v["evidence"]["hypothesis_examples"] >= 25 for v in document["verdicts"])
    else:
        assert document["outcome"] == "inconclusive"
        assert document["inconclusive"]


def test_the_forged_attack_of_the_last_round_is_caught(tmp_path: Path, capsys: object) -> None:
    """The buggy class of the harness, forging its own load answer: judged, and it fails."""
    forge = """
import os, struct, sys
import msgspec
payload = msgspec.msgpack.encode(["ok", ["learner", "", None]])
try:
    os.write(int(sys.argv[-3]), struct.pack(">I", len(payload)) + payload)
except (OSError, ValueError, IndexError):
    pass
"""
    path = write_attack(tmp_path, forge)
    failed(check_in_process(capsys, f"{path}:Buggy"), "PROTO-1")
