"""The invariant catalogue, the prose spec, the reference, the monitor's registry and the mutant
zoo cite one another consistently."""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

import pytest

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import END_CHECKS, Check, iteration_plan, registered_ids
from kvsched.checks.monitor.runtime import Monitor
from kvsched.checks.mutants.zoo import ZOO
from kvsched.reference import ContinuousScheduler, run
from kvsched.spec.applicability import applicable
from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import BY_ID, CATALOGUE
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.vocabulary import STEPS

ROOT = Path(__file__).resolve().parents[2]


def test_ids_are_unique_in_the_catalogue_and_the_prose_table() -> None:
    assert len(BY_ID) == len(CATALOGUE)
    assert len(prose_ids()) == len(set(prose_ids()))


def test_every_invariant_is_cited_where_the_reference_enforces_it() -> None:
    for invariant in CATALOGUE:
        path = invariant.enforced_by.split()[0]
        source = (ROOT / path).read_text()
        assert invariant.id in source, f"{invariant.id} is not cited in {path}"


def test_policy_specific_invariants_apply_only_to_their_policy() -> None:
    static = {i.id for i in applicable("static")}
    continuous = {i.id for i in applicable("continuous")}
    other = {i.id for i in applicable("vllm-like")}
    assert "BATCH-2" in static - continuous
    assert "BATCH-3" in continuous - static
    assert "BATCH-4" in static & continuous
    assert {"BATCH-2", "BATCH-3", "BATCH-4"}.isdisjoint(other)
    assert "PAGE-2" in other


# The registry: each id has a monitor check, a mutant and a prose row ---------------------------


def prose_ids() -> list[str]:
    semantics = (ROOT / "spec" / "semantics.md").read_text()
    table = semantics[semantics.index("## 8. Invariant catalogue") :]
    return re.findall(r"^\| ([A-Z]+-\d+) \|", table, flags=re.MULTILINE)


def gaps(
    catalogue: Collection[str],
    registered: Collection[str],
    mutants: Collection[str],
    prose: Collection[str],
) -> list[str]:
    """What keeps the catalogue, the monitor's registry, the zoo and the prose table apart."""
    problems = []
    for invariant in catalogue:
        if invariant not in registered:
            problems.append(f"{invariant} has no registered monitor check (checks/monitor/)")
        if invariant not in mutants:
            problems.append(f"{invariant} has no mutant in the zoo (checks/mutants/zoo.py)")
        if invariant not in prose:
            problems.append(f"{invariant} has no row in spec/semantics.md, section 8")
    others = (
        ("the monitor registers", registered),
        ("the zoo expects", mutants),
        ("spec/semantics.md lists", prose),
    )
    for where, ids in others:
        problems += [f"{where} {i}, which the catalogue does not have" for i in sorted(ids)
                     if i not in catalogue]  # fmt: skip
    return problems


def test_every_id_has_a_check_a_mutant_and_a_row_and_nothing_else_is_registered() -> None:
    registered = registered_ids()
    mutants = {mutant.expected for mutant in ZOO}
    assert gaps(BY_ID, registered, mutants, prose_ids()) == []


def test_the_registry_test_fails_on_each_kind_of_gap() -> None:
    ids, registered = set(BY_ID), set(registered_ids())
    mutants, prose = {mutant.expected for mutant in ZOO}, set(prose_ids())
    assert gaps(ids, registered - {"PAGE-4"}, mutants, prose) == [
        "PAGE-4 has no registered monitor check (checks/monitor/)"
    ]
    assert gaps(ids, registered, mutants - {"DEC-3"}, prose) == [
        "DEC-3 has no mutant in the zoo (checks/mutants/zoo.py)"
    ]
    assert gaps(ids, registered, mutants, prose - {"BATCH-4"}) == [
        "BATCH-4 has no row in spec/semantics.md, section 8"
    ]
    assert gaps(ids, registered | {"KV-9"}, mutants, prose) == [
        "the monitor registers KV-9, which the catalogue does not have"
    ]


def test_every_step_has_a_check_and_a_fault_is_judged_before_unfinished_requests() -> None:
    assert {c.step for c in iteration_plan()} == set(STEPS)
    assert [c.name for c in END_CHECKS][:1] == ["the_target_kept_answering"]  # PROTO-1 first


def test_a_check_reporting_an_id_it_did_not_register_is_a_bug_of_ours() -> None:
    def liar(monitor: Monitor, event: IterationEvent) -> Finding | None:
        return Finding("PAGE-2", event.iteration, "made up")

    result = run(load_teaching_trace(), ContinuousScheduler)
    monitor = Monitor(result.workload, "continuous")
    monitor.until_decode = (Check("liar", "bound", ("PAGE-1",), liar),)
    with pytest.raises(RuntimeError, match="liar reported PAGE-2 but registered only PAGE-1"):
        monitor.observe(result.events[0])
