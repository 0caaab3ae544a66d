"""vidur's Sarathi preempts a request, admits it again and finishes it in one iteration, for real.

The engine of tests/engines/vidur_like.py does it on the workload of tests/engines/recorded_logs.py
(found by a random search over small workloads, then cut down to one request): it schedules a
running request only while a page is free, as vidur does, so a request holding the whole pool
restarts itself and gets its pages straight back. The recorded version-2 log and the same class
hosted in its own process are both clean; the version-1 log of the same run, with one list of
frees per request, reads as the double free (PAGE-3) that version 2 exists to avoid.
"""

from __future__ import annotations

import json
from pathlib import Path

from engines.recorded_logs import SARATHI, SCENARIOS, Scenario
from engines.vidur_like import VidurSarathi
from hypothesis import find, settings

from kvsched.checks.eventlog.jsonl import check_log, log_lines
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.search.strategies import workloads
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.load import SchedulerTarget
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.reference import run
from kvsched.reference.engine import Run
from kvsched.spec.workload import Workload

ENGINES = Path(__file__).resolve().parents[1] / "engines"
SCENARIO: Scenario = next(s for s in SCENARIOS if s.name.startswith("vidur_sarathi"))


def _in_one_iteration(run: Run) -> list[int]:
    return [
        event.iteration
        for event in run.events
        for rid in event.preempted
        if rid in event.admitted and rid in event.finished
    ]


def test_the_recorded_log_preempts_readmits_and_finishes_in_one_iteration() -> None:
    assert SCENARIO.version == 2 and SCENARIO.expected is None
    lines = [json.loads(line) for line in SCENARIO.path.read_text().splitlines()]
    assert lines[0]["version"] == 2 and lines[0]["target"]["restart"] == "fold"
    kinds = {line["iteration"]: [op[0] for op in line["ops"]] for line in lines[1:]}
    assert any(
        ops.index("preempt") < ops.index("admit") < ops.index("finish")
        for ops in kinds.values()
        if {"preempt", "admit", "finish"} <= set(ops)
    )
    assert check_log(SCENARIO.path) is None


def test_version_1_of_the_same_run_reads_as_a_double_free(tmp_path: Path) -> None:
    recorded, properties = SCENARIO.record()
    assert _in_one_iteration(recorded) == [4]
    path = tmp_path / "v1.jsonl"
    path.write_text("".join(line + "\n" for line in log_lines(recorded, properties)))
    finding = check_log(path)
    assert finding is not None and (finding.invariant, finding.iteration) == ("PAGE-3", 4)


def test_the_class_hosted_in_its_own_process_is_clean() -> None:
    remote = RemoteTarget(f"{ENGINES / 'vidur_like.py'}:VidurSarathi", Confinement())
    try:
        target = remote.load()
        assert isinstance(target, SchedulerTarget) and target.properties is not None
        assert target.properties.restart == "fold"  # the declaration crossed the process boundary
        policy, properties = target.policy, target.properties
        result = run(SARATHI, target.factory, policy, properties=properties)
        assert result.fault is None, result.fault
        assert _in_one_iteration(result) == [4]
        assert monitor_run(result, properties) is None
    finally:
        remote.close()


def test_hypothesis_finds_the_case_on_its_own_and_it_is_clean() -> None:
    properties = VidurSarathi.properties

    def shows_the_case(workload: Workload) -> bool:
        return bool(
            _in_one_iteration(run(workload, VidurSarathi, properties.policy, properties=properties))
        )

    found = find(
        workloads(max_requests=4),
        shows_the_case,
        settings=settings(max_examples=2000, database=None, deadline=None),
    )
    result = run(found, VidurSarathi, properties.policy, properties=properties)
    assert _in_one_iteration(result)
    assert monitor_run(result, properties) is None
