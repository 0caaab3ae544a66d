"""Each check's say in the fast path (its ``Steady``, checks/monitor/registry.py) is what keeps
the fast path from missing a violation: turn any one predicate off, and a log is judged wrongly.

For every line predicate a check declares, a small log (tests/steady_cases.py) violates that
check on a line the fast path would otherwise take in; for every request predicate, on a request
such a line names; for a check the fast path runs on allocations, in them. With the registry as
it is, both paths find the violation; with the predicate made to say "skip" always, the fast
path takes the line in and the two disagree. A new predicate without a case fails
:func:`test_every_predicate_has_a_case`. No log is kept off the fast path as a whole: a
predicate that cannot judge what a log declares declines its lines, so its case covers that too
(a priority order's idle slot, below).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from steady_cases import ALLOCATION_CASES, FREES_CASES, LINE_CASES, REQUEST_CASES

from kvsched.checks.eventlog.jsonl import EventLogError
from kvsched.checks.eventlog.log_check import LogCheck, check_stream
from kvsched.checks.monitor import registry


def predicates() -> dict[str, tuple[registry.Check[Any], str]]:
    """Every predicate a check declares, by its function's name, with the check and its kind."""
    found: dict[str, tuple[registry.Check[Any], str]] = {}
    for check in registry.iteration_plan():
        steady = check.steady
        assert steady is not None, f"{check.name} declares no Steady"
        if steady.line is not None:
            found[steady.line.__name__] = (check, "line")
        if steady.request is not None:
            found[steady.request.__name__] = (check, "request")
        if steady.allocations is not None:
            found[steady.allocations.__name__] = (check, "allocations")
        if steady.frees is not None:
            found[steady.frees.__name__] = (check, "frees")
    return found


def verdicts(path: Path) -> list[Any]:
    """The full and the fast path's verdicts, with and without all findings. Where the fast
    path's ledgers refuse what a wrong predicate let it take in (a preemption of a request the
    ledger cannot preempt, a thrash it would have to report), it stops on an AssertionError:
    a crash, never a pass."""
    seen: list[Any] = []
    for every in (False, True):
        for fast in (False, True):
            try:
                checked = check_stream(path, all_findings=every, fast=fast)
            except EventLogError as error:
                seen.append(f"invalid: {error}")
                continue
            except AssertionError as error:  # the fast path's own checks of what it moved
                seen.append(f"crashed: {error}")
                continue
            assert isinstance(checked, LogCheck)
            seen.append((checked.finding, checked.later))
    return seen


def agree(seen: list[Any]) -> bool:
    return seen[0] == seen[1] and seen[2] == seen[3]


def test_every_predicate_has_a_case() -> None:
    kinds = predicates().items()
    lines = {name for name, (_, kind) in kinds if kind == "line"}
    cased = {case.split("/")[0] for case in LINE_CASES}
    assert lines == cased, "each line predicate needs a case in LINE_CASES"
    requests = {name for name, (_, kind) in kinds if kind == "request"}
    cased = {case.split("/")[0] for case in REQUEST_CASES}
    assert requests == cased, "each request predicate needs a case in REQUEST_CASES"
    allocations = {name for name, (_, kind) in kinds if kind == "allocations"}
    assert allocations == set(ALLOCATION_CASES), (
        "each allocations predicate needs a case in ALLOCATION_CASES"
    )
    frees = {name for name, (_, kind) in kinds if kind == "frees"}
    assert frees == set(FREES_CASES), "each frees predicate needs a case in FREES_CASES"


SKIP_ALWAYS: dict[str, Callable[[registry.Steady], registry.Steady]] = {
    "line": lambda steady: replace(steady, line=lambda monitor, line: True),
    "request": lambda steady: replace(steady, request=lambda request: registry.FOREVER),
    "allocations": lambda steady: replace(steady, allocations=None),
    "frees": lambda steady: replace(steady, frees=None),
}
"""Each kind of predicate made to say "skip" always."""


@pytest.mark.parametrize(
    ("kind", "name"),
    [("line", name) for name in sorted(LINE_CASES)]
    + [("request", name) for name in sorted(REQUEST_CASES)]
    + [("allocations", name) for name in sorted(ALLOCATION_CASES)]
    + [("frees", name) for name in sorted(FREES_CASES)],
)
def test_turning_a_predicate_off_is_caught(
    kind: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = {
        "line": LINE_CASES,
        "request": REQUEST_CASES,
        "allocations": ALLOCATION_CASES,
        "frees": FREES_CASES,
    }
    case = cases[kind][name]
    path = tmp_path / f"{name.replace('/', '-')}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in case()))
    seen = verdicts(path)
    assert not any(isinstance(verdict, str) for verdict in seen), (
        f"an invalid or crashing case: {seen}"
    )
    assert agree(seen), seen
    assert seen[2][0] is not None or seen[2][1], f"the case breaks nothing: {seen[2]}"
    check, declared = predicates()[name.split("/")[0]]
    assert declared == kind
    steady = check.steady
    assert steady is not None
    off = replace(check, steady=SKIP_ALWAYS[kind](steady))
    assert check.step is not None
    step = list(registry.ITERATION_CHECKS[check.step])
    step[step.index(check)] = off
    monkeypatch.setitem(registry.ITERATION_CHECKS, check.step, step)
    assert not agree(verdicts(path)), f"with {name} off, the fast path still agrees"
