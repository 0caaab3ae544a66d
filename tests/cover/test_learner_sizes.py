"""Learners at realistic sizes: the families a check replays, bugs that show only late, and the
fast reading of the state, which must accept exactly what the Python walk accepts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.search.runs import PROFILE_RUNS, profile_runs
from kvsched.checks.search.strategies import SEARCH_SIZES
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.learner import learner_factory
from kvsched.checks.targets.learner_state import LearnerStateError, readable_state, walked_state
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.reference import run
from kvsched.reference.families import check_workloads
from kvsched.spec.teaching import load_teaching_trace

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = ROOT / "checks" / "mutants" / "learner"
CORRECT = ROOT / "examples" / "learner" / "correct.py"
CI_SIZES = profile_runs("ci").families("learner")


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"sized_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_finding(path: Path, policy: str, sizes: tuple[int, ...]) -> str | None:
    schedule = _module(path).schedule_iteration
    for size in sizes:
        for workload in check_workloads(size):
            finding = monitor_run(run(workload, learner_factory(schedule, policy), policy=policy))
            if finding is not None:
                return finding.invariant
    return None


LATE = [("buggy_late_leak.py", "PAGE-3"), ("buggy_late_overtake.py", "BATCH-4")]


@pytest.mark.parametrize(("name", "invariant"), LATE)
@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_a_bug_that_shows_only_late_is_caught_by_the_ci_profiles_runs(
    name: str, invariant: str, policy: str
) -> None:
    path = MUTANTS / name
    workload = load_teaching_trace()
    schedule = _module(path).schedule_iteration
    assert monitor_run(run(workload, learner_factory(schedule, policy), policy=policy)) is None
    # Beyond what the ci search draws: at most 64 requests, so never 65 finished ones.
    assert SEARCH_SIZES["ci"]["max_requests"] < 65 < min(CI_SIZES)
    assert _first_finding(path, policy, CI_SIZES) == invariant


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_the_correct_solution_passes_the_learners_families(policy: str) -> None:
    assert _first_finding(CORRECT, policy, CI_SIZES) is None


def test_every_profile_runs_families_for_learners_and_the_deeper_ones_long_runs() -> None:
    assert all(runs.families("learner") for runs in PROFILE_RUNS.values())
    for name in ("dev", "thorough"):
        runs = PROFILE_RUNS[name]  # type: ignore[index]
        assert max(runs.families("learner")) >= 5_000
        assert max(runs.families("scheduler")) >= 10_000
    assert max(PROFILE_RUNS["thorough"].families("learner")) >= 10_000
    assert profile_runs("ci").families("scheduler") == (1000,)


@pytest.mark.parametrize("policy", ["static", "continuous"])
def test_a_hosted_learner_is_judged_event_for_event_as_one_in_this_process(policy: str) -> None:
    """The hosted adapter skips its copies (the wire makes them): same events, same verdict."""
    local = _module(CORRECT).schedule_iteration
    remote = RemoteTarget(str(CORRECT), Confinement(sandbox="none"))
    try:
        target = remote.load()
        hosted = target.solution.schedule_iteration  # type: ignore[union-attr]
        assert target.solution.isolated  # type: ignore[union-attr]
        workload = check_workloads(CI_SIZES[0])[0]
        near = run(workload, learner_factory(local, policy), policy=policy)
        far = run(workload, learner_factory(hosted, policy, isolated=True), policy=policy)
    finally:
        remote.close()
    assert far.events == near.events and far.fault is None


# States of the shape of spec/learner.md, some damaged where a fast reading could be lenient.
_WRONG = ((1,), {1}, frozenset({1}), True, 1.0, "1", None, [1.0], [True], 2**70, [2**70])
_record = st.fixed_dictionaries(
    {
        "id": st.sampled_from("abc"),
        "generated": st.integers(0, 9),
        "pages": st.lists(st.integers(0, 9), max_size=3),
    },
    optional={"extra": st.one_of(st.integers(), st.tuples(st.integers()))},
)
_valid = st.fixed_dictionaries(
    {
        "iteration": st.integers(0, 9),
        "waiting": st.lists(_record, max_size=3),
        "running": st.lists(_record, max_size=3),
        "finished": st.lists(_record, max_size=3),
        "free_pages": st.lists(st.integers(0, 9), max_size=3),
    }
)


@st.composite
def _states(draw: st.DrawFn) -> Any:
    state = draw(_valid)
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(state)))
        value = state[key]
        records = [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []
        damage = draw(st.sampled_from(["field", "no field", "tuple", "value", "no key"]))
        if damage in ("field", "no field") and records:
            record = draw(st.sampled_from(records))
            field = draw(st.sampled_from(["id", "generated", "pages", 1]))
            if damage == "field":
                record[field] = draw(st.sampled_from(_WRONG))
            else:
                record.pop(field, None)
        elif damage == "tuple" and isinstance(value, list):
            state[key] = tuple(value)
        elif damage == "no key":
            del state[key]
        else:
            state[key] = draw(st.sampled_from(_WRONG))
    return state


def _accepts(read: Any, state: Any) -> bool:
    try:
        read(state)
    except LearnerStateError:
        return False
    return True


def _valid_but(**changes: Any) -> dict[str, Any]:
    record = {"id": "a", "generated": 0, "pages": [1], **changes.pop("record", {})}
    return {"waiting": [record], "running": [], "finished": [], "free_pages": [2], **changes}


# Where msgspec alone is lenient: any sequence for a list, any mapping for a dict.
LENIENT = [
    _valid_but(record={"pages": (1,)}),
    _valid_but(record={"pages": {1}}),
    _valid_but(free_pages=(2,)),
    _valid_but(running=({"id": "b", "generated": 0, "pages": []},)),
    _valid_but(finished=[MappingProxyType({"id": "b", "generated": 1, "pages": [3]})]),
]


@pytest.mark.parametrize("state", LENIENT)
def test_what_msgspec_alone_would_take_is_refused_as_the_walk_refuses_it(state: Any) -> None:
    assert not _accepts(walked_state, state)
    assert not _accepts(readable_state, state)


@given(_states())
def test_the_fast_reading_accepts_exactly_what_the_python_walk_accepts(state: Any) -> None:
    assert _accepts(readable_state, state) == _accepts(walked_state, state)


@given(_states())
def test_on_plain_data_the_fast_reading_still_agrees_with_the_walk(state: Any) -> None:
    """What the wire decodes holds no tuple or set, so the reading then skips looking for one."""
    try:
        plain = msgspec.msgpack.decode(msgspec.msgpack.encode(state))
    except (TypeError, ValueError, OverflowError):  # the wire carries none of these as such
        return
    fast = _accepts(lambda s: readable_state(s, plain=True), plain)
    assert fast == _accepts(walked_state, plain)


# A correct solution that, once three requests have finished, changes the first of them in the
# state it returns: what the host holds of a run's finished requests (host.py, ``_step``) must
# never hide a change from kvsched, nor hand the learner anything but what it returned.
_TAMPERED = """
exec(compile(open({correct!r}).read(), "correct.py", "exec"))
_correct = schedule_iteration


def schedule_iteration(state, limits, policy):
    if {seen} and len(state["finished"]) >= 3 and state["finished"][0].get("seen") != "kept":
        raise ValueError("the learner was not given back what it returned")
    state = _correct(state, limits, policy)
    if len(state["finished"]) >= 3:
        {change}
    return state
"""
_CHANGES = {
    "reordered": 'state["finished"][:2] = state["finished"][1::-1]',
    "dropped": 'del state["finished"][0]',
    "a bool for an int": 'state["finished"][0]["generated"] = True',
    "a float page": 'state["finished"][0]["pages"] = [1.0]',
    "a key added": 'state["finished"][0]["seen"] = "kept"',
    "unchanged": "pass",
}


def _hosted_run(path: Path, policy: str, sent: list[int] | None = None) -> Any:
    remote = RemoteTarget(str(path), Confinement(sandbox="none"))
    try:
        if sent is not None:
            exchange = remote._exchange

            def spy(message: list[Any], follows: bool = False) -> Any:
                if message[0] == "step":
                    sent.append(len(message[3][0]["finished"]))
                return exchange(message, follows)

            remote._exchange = spy  # type: ignore[method-assign]
        target = remote.load()
        hosted = target.solution.schedule_iteration  # type: ignore[union-attr]
        workload = load_teaching_trace()
        return run(workload, learner_factory(hosted, policy, isolated=True), policy=policy)
    finally:
        remote.close()


@pytest.mark.parametrize("change", sorted(_CHANGES))
def test_a_change_to_a_finished_request_is_judged_hosted_as_in_this_process(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "tampered.py"
    seen = change == "a key added"
    path.write_text(_TAMPERED.format(correct=str(CORRECT), change=_CHANGES[change], seen=seen))
    local = _module(path).schedule_iteration
    near = run(load_teaching_trace(), learner_factory(local, "continuous"), policy="continuous")
    far = _hosted_run(path, "continuous")
    assert far.events == near.events
    assert repr(far.fault) == repr(near.fault)
    assert (far.fault is None) == (change in ("a key added", "unchanged"))


def test_a_hosted_learners_finished_requests_cross_the_wire_once() -> None:
    """Each step sends only the finished requests the host does not hold: with a correct
    solution, none, so a step's bytes do not grow with the run; and one step runs several
    iterations, so there are fewer steps than iterations."""
    sent: list[int] = []
    far = _hosted_run(CORRECT, "continuous", sent)
    assert far.fault is None and 0 < len(sent) < len(far.events) / 4 and len(far.events) > 50
    assert sent == [0] * len(sent)
