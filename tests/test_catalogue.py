"""The invariant catalogue, the prose spec and the reference cite one another consistently."""

import re
from pathlib import Path

from kvsched.spec.invariants import BY_ID, CATALOGUE, applicable

ROOT = Path(__file__).resolve().parent.parent


def test_ids_are_unique_and_the_prose_table_lists_exactly_them() -> None:
    assert len(BY_ID) == len(CATALOGUE)
    semantics = (ROOT / "spec" / "semantics.md").read_text()
    table = semantics[semantics.index("## 8. Invariant catalogue") :]
    prose_ids = re.findall(r"^\| ([A-Z]+-\d+) \|", table, flags=re.MULTILINE)
    assert sorted(prose_ids) == sorted(BY_ID)


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
