"""Loading targets (checks/targets/load.py): every form, and a clear message for everything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsched.checks.eventlog.jsonl import write_log
from kvsched.checks.targets.load import (
    EventLogTarget,
    LearnerTarget,
    SchedulerTarget,
    TargetError,
    load_target,
)
from kvsched.reference import ContinuousScheduler, StaticScheduler, run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.teaching import load_teaching_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "learner"

SCHEDULER_FILE = """
from kvsched.reference import ContinuousScheduler
from kvsched.spec.properties import TargetProperties

class Mine(ContinuousScheduler):
    pass

class Declared(ContinuousScheduler):
    policy = ""
    properties = TargetProperties(policy="continuous")

class Conflicting(ContinuousScheduler):
    properties = TargetProperties(policy="static")

class BadProperties(ContinuousScheduler):
    properties = {"policy": "continuous"}

class NoSchedule:
    def __init__(self, limits): ...
    def add_request(self, request): ...

NOT_CALLABLE = 3


def build(limits):
    return ContinuousScheduler(limits)
"""


@pytest.fixture
def scheduler_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_scheduler.py"
    path.write_text(SCHEDULER_FILE)
    return path


@pytest.mark.parametrize(
    ("spec", "cls", "policy"),
    [
        ("kvsched.reference.static:StaticScheduler", StaticScheduler, "static"),
        ("kvsched.reference.continuous:ContinuousScheduler", ContinuousScheduler, "continuous"),
    ],
)
def test_module_class_form(spec: str, cls: type, policy: str) -> None:
    target = load_target(spec)
    assert isinstance(target, SchedulerTarget)
    assert target.factory is cls
    assert target.policy == policy


def test_file_class_form_and_declared_properties(scheduler_file: Path) -> None:
    mine = load_target(f"{scheduler_file}:Mine")
    assert isinstance(mine, SchedulerTarget) and mine.policy == "continuous"
    factory = load_target(f"{scheduler_file}:build")
    assert isinstance(factory, SchedulerTarget) and factory.policy == ""
    declared = load_target(f"{scheduler_file}:Declared")
    assert isinstance(declared, SchedulerTarget)
    assert declared.policy == "continuous"
    assert declared.properties == TargetProperties(policy="continuous")


def test_learner_file_and_event_log_forms(tmp_path: Path) -> None:
    learner = load_target(str(EXAMPLES / "correct.py"))
    assert isinstance(learner, LearnerTarget)
    assert learner.solution.allocate_kv_pages is not None
    assert learner.solution.schedule_iteration is not None
    log = tmp_path / "run.jsonl"
    write_log(run(load_teaching_trace(), StaticScheduler, "static"), log)
    assert load_target(str(log)) == EventLogTarget(str(log), log)


@pytest.mark.parametrize(
    ("attribute", "words"),
    [
        ("Nope", "has no attribute 'Nope' (scheduler classes defined there: BadProperties, "),
        ("NoSchedule", "it has no schedule(), update_from_output()"),
        ("NOT_CALLABLE", "is a int, not a scheduler class"),
        ("Conflicting", "declares policy 'continuous' but its properties say 'static'"),
        ("BadProperties", "'properties' must be a kvsched.spec.properties.TargetProperties"),
    ],
)
def test_what_is_missing_is_named(scheduler_file: Path, attribute: str, words: str) -> None:
    with pytest.raises(TargetError) as error:
        load_target(f"{scheduler_file}:{attribute}")
    assert words in str(error.value)


def test_unloadable_files_and_modules(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("class A:\n    def f(self)\n        pass\n")
    raising = tmp_path / "raising.py"
    raising.write_text("import json\nVALUE = json.loads('{')\n")
    exiting = tmp_path / "exiting.py"
    exiting.write_text("import sys\nsys.exit(4)\n")
    empty = tmp_path / "empty.py"
    empty.write_text(
        "class Mine:\n    def add_request(self, r): ...\n"
        "    def schedule(self): ...\n    def update_from_output(self, o): ...\n"
    )
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    cases = {
        f"{broken}:A": f"{broken}:2: syntax error in the target",
        f"{raising}:X": "raised JSONDecodeError",
        f"{exiting}:X": "raised SystemExit",
        str(empty): f"to check a scheduler class, name it: {empty}:Mine",
        str(notes): "not a Python file (.py) or an event log (.jsonl)",
        f"{tmp_path / 'absent.py'}:X": "no such file",
        str(tmp_path / "absent.jsonl"): "no such file",
        "no_such_package.module:Class": "no module named 'no_such_package'",
        "not a module": "not a module name",
        "": "empty target",
    }  # fmt: skip
    for spec, words in cases.items():
        with pytest.raises(TargetError) as error:
            load_target(spec)
        assert words in str(error.value), spec
