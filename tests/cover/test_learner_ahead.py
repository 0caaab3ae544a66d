"""A hosted learner run several iterations per round trip is judged as one run an iteration per
round trip: the same events, the same fault, and each call given the very state, limits and
policy (checks/targets/host.py, ``_Served._steps``; remote.py, ``RemoteTarget.step``)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsched.checks.search.strategies import workloads
from kvsched.checks.targets import learner
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.learner import LearnerScheduler, learner_factory
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.reference import run
from kvsched.reference.engine import Run
from kvsched.reference.families import check_workloads
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload

CORRECT = Path(__file__).resolve().parents[2] / "examples" / "learner" / "correct.py"

# Each learner logs every call's arguments as it got them (LOG), then answers as the correct
# solution does, changed by CHANGE (which sees ``state``, ``limits`` and ``at``, the iteration).
_LEARNER = """
import json
exec(open({correct!r}).read())
_correct = schedule_iteration
_kept = []


def schedule_iteration(state, limits, policy):
    with open({log!r}, "a") as log:
        log.write(json.dumps([repr(state), repr(limits), policy]) + "\\n")
    at = state["iteration"]
    for old in _kept:  # what this process returned before: kvsched's copy is not this one
        old["waiting"].clear()
        old["free_pages"].clear()
    _kept[:] = []
    state = _correct(state, limits, policy)
    {change}
    return state
"""

CHANGES = {
    "correct": "pass",
    "extra keys": (
        'state["mine"] = {"f": 1.5, "big": 2**70, "none": None, "yes": True, 1: "one",'
        ' "nested": [[at, {"x": b"raw"}], (1, 2)]}; state["count"] = at'
    ),
    "limits changed": 'limits["page_size"] = 10**6; limits["batch_limit"] = 0',
    "state kept": "_kept.append(state)",
    "finished reordered": (
        'state["finished"][:2] = state["finished"][1::-1] if at % 5 == 0 else state["finished"][:2]'
    ),
    "unreadable at 7": "state = None if at == 7 else state",
    "tuple at 4": 'state["waiting"] = tuple(state["waiting"]) if at == 4 else state["waiting"]',
    "raises at 9": "assert at != 9, 'ninth iteration'",
    "huge at 5": 'state["mine"] = [[]] * (10**6 if at == 5 else 1)',
}
# Refused by kvsched at 5 (a count that goes down), which the host does not foresee, and dead at
# 6, an iteration only the host runs: on a workload with a request 'x' only.
_DIES_PAST = """
    if any(r["id"] == "x" for r in state["running"]):
        if at == 5:
            state["running"][0]["generated"] = -1
        if at == 6:
            import os
            os._exit(3)"""


class _Single(LearnerScheduler):
    """A hosted learner's adapter that the engine tells nothing ahead: a call a round trip."""

    def foresee(self, joining: Mapping[int, Sequence[Request]], last: int) -> None:
        pass


class _Hosted:
    """One learner in its host, run either way; each run's calls read back from its log."""

    def __init__(self, folder: Path, change: str, ahead: bool, code: str = "") -> None:
        self.folder = folder / ("ahead" if ahead else "single")
        self.folder.mkdir()
        self.log = self.folder / "calls.log"
        path = self.folder / "solution.py"
        change = code or CHANGES[change]
        source = _LEARNER.format(correct=str(CORRECT), log=str(self.log), change=change)
        path.write_text(source, encoding="utf-8")
        self.ahead = ahead
        self.remote = RemoteTarget(str(path), Confinement(sandbox="none"))
        self.steps = 0
        exchange = self.remote._exchange

        def counted(message: list[Any], follows: bool = False) -> Any:
            self.steps += message[0] == "step"
            return exchange(message, follows)

        self.remote._exchange = counted  # type: ignore[method-assign]
        target = self.remote.load()
        self.function = target.solution.schedule_iteration  # type: ignore[union-attr]

    def run(
        self, workload: Workload, policy: str, key: int, finish: bool = True
    ) -> tuple[Run, list[Any]]:
        self.log.write_text("", encoding="utf-8")
        # The run's number crosses the wire, and an answer's bound counts the bytes sent.
        learner._RUNS = itertools.count(key)
        factory: SchedulerFactory = learner_factory(self.function, policy, isolated=True)
        if not self.ahead:

            def factory(limits: Limits) -> Any:
                return _Single(limits, self.function, policy, isolated=True)

        result = run(workload, factory, policy=policy)
        if finish:
            self.remote.finish()  # no frame left on the wire
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return result, [json.loads(line) for line in lines]


@pytest.fixture(scope="module", params=sorted(CHANGES))
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[_Hosted, _Hosted]]:
    folder = tmp_path_factory.mktemp("ahead")
    hosted = (_Hosted(folder, request.param, True), _Hosted(folder, request.param, False))
    try:
        yield hosted
    finally:
        for each in hosted:
            each.remote.close()


def _same(pair: tuple[_Hosted, _Hosted], workload: Workload, policy: str) -> None:
    ahead, single = pair
    steps = ahead.steps, single.steps
    key = next(_KEYS)
    far, far_calls = ahead.run(workload, policy, key)
    near, near_calls = single.run(workload, policy, key)
    assert far.events == near.events
    assert repr(far.fault).replace(str(ahead.folder), "") == repr(near.fault).replace(
        str(single.folder), ""
    )
    assert far.drained == near.drained
    # Each call was given the very arguments. Past a fault the host did not see coming (a state
    # it could read but kvsched refuses) it may have run on; in a run without a fault, it made
    # no call that the run did not ask for.
    assert far_calls[: len(near_calls)] == near_calls
    if near.fault is None:
        assert far_calls == near_calls
    assert single.steps - steps[1] == len(near_calls)
    assert ahead.steps - steps[0] <= single.steps - steps[1]


def _burst() -> Workload:
    """Bursts of one-token requests, an idle gap, then late long ones."""
    requests = [Request(f"a{i}", 0, 3, 1) for i in range(9)]
    requests += [Request(f"b{i}", 5, 17, 1 + i % 2) for i in range(7)]
    requests += [Request(f"c{i}", 40 + i // 3, 30, 12) for i in range(6)]
    return Workload("bursts", Limits(batch_limit=4, page_size=4, pool_pages=40), tuple(requests))


_KEYS = itertools.count(10**6)

FIXED = [load_teaching_trace(), _burst(), check_workloads(100)[0]]


@pytest.mark.parametrize("policy", ["static", "continuous"])
@pytest.mark.parametrize("index", range(len(FIXED)))
def test_running_ahead_changes_nothing_on_fixed_workloads(
    pair: tuple[_Hosted, _Hosted], index: int, policy: str
) -> None:
    _same(pair, FIXED[index], policy)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(workload=workloads(), policy=st.sampled_from(["static", "continuous"]))
def test_running_ahead_changes_nothing_on_drawn_workloads(
    pair: tuple[_Hosted, _Hosted], workload: Workload, policy: str
) -> None:
    _same(pair, workload, policy)


def test_a_correct_learner_takes_few_round_trips(tmp_path: Path) -> None:
    """The lever itself: a long run costs a handful of round trips, not one an iteration."""
    hosted = _Hosted(tmp_path, "correct", ahead=True)
    try:
        result, calls = hosted.run(check_workloads(100)[0], "continuous", next(_KEYS))
    finally:
        hosted.remote.close()
    assert result.drained and len(result.events) == len(calls) > 50
    assert hosted.steps < len(result.events) / 4


def test_a_host_that_dies_only_past_a_runs_end_is_replaced_not_judged(tmp_path: Path) -> None:
    """The run ends at a fault the host did not see coming; the host, running ahead, dies in an
    iteration no call asked for. The next run gets a new host, and both runs are judged as
    they are one call a round trip."""
    limits = Limits(batch_limit=2, page_size=4, pool_pages=20)
    dying = Workload("x", limits, (Request("x", 0, 3, 12), Request("y", 0, 3, 12)))
    runs = {}
    for ahead in (True, False):
        hosted = _Hosted(tmp_path, "", ahead, code=_DIES_PAST)
        try:
            first, _ = hosted.run(dying, "continuous", 7, finish=False)
            second, _ = hosted.run(load_teaching_trace(), "continuous", 8, finish=False)
            hosted.remote.finish()
        finally:
            hosted.remote.close()
        runs[ahead] = (first, second, hosted.remote.restarts)
        assert first.fault is not None and first.fault.iteration == 5
        assert "went down" in first.fault.message
        assert second.fault is None and second.drained
    assert runs[True][2] == 1 and runs[False][2] == 0
    assert runs[True][0].events == runs[False][0].events
    assert runs[True][1].events == runs[False][1].events
