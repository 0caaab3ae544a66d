"""Verdicts show the catalogue's layers, the efficiency figures, and say when conformance was
not checked (spec/semantics.md, section 8)."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from kvsched.cli import main
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine_scheduler import VLLM_V1, EngineScheduler
from kvsched.spec.invariants import BY_ID, EFFICIENCY
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits

ENGINE = "kvsched.reference.engine_scheduler:VLLMV1Scheduler"
QUICK = ["--max-examples", "10", "--z3-requests", "0"]
"""What these claims need of a check: its report's shape and words, not the default search."""


class Undeclared(EngineScheduler):
    """The reference engine's vLLM v1 design with no declaration of policy or admission."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits, VLLM_V1)


def test_json_and_junit_carry_each_invariants_layer_and_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "junit.xml"
    assert main(["check", ENGINE, *QUICK, "--json", "--junit-xml", str(junit)]) == 0
    [verdict] = json.loads(capsys.readouterr().out)["verdicts"]
    assert {row["id"]: row["layer"] for row in verdict["invariants"]} == {
        i: BY_ID[i].layer for i in BY_ID
    }
    assert verdict["efficiency"]["measured_on"] == "the teaching trace"
    assert set(verdict["efficiency"]["figures"]) == {figure.id for figure in EFFICIENCY}
    classes = {c.get("classname") for c in ElementTree.parse(junit).getroot().iter("testcase")}
    assert {name.rsplit(".", 1)[1] for name in classes} == {"safety", "liveness", "conformance"}


def test_a_target_declaring_no_policy_is_told_conformance_was_not_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", f"{__file__}:Undeclared", *QUICK]) in (0, 1)
    out = capsys.readouterr().out
    assert "Conformance was not checked" in out and 'policy = "continuous"' in out
    assert main(["check", ENGINE, *QUICK]) == 0
    assert "Conformance was not checked" not in capsys.readouterr().out


class DeclaresPreemptionSpeaksTheLesson(ContinuousScheduler):
    """Declares preemption but answers in the lesson protocol: no computed tokens."""

    properties = TargetProperties(policy="continuous", preemption=True, admission="lazy")


def test_a_class_declaring_preemption_gets_a_verdict_not_exit_3(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", f"{__file__}:DeclaresPreemptionSpeaksTheLesson"]) == 1
    out = capsys.readouterr().out
    assert "PROTO-1 violated" in out and "ScheduledBatch.computed" in out
