"""A prefill chunk capped below the token budget (vLLM's ``long_prefill_token_threshold``):
declared as ``prefill_chunk``, it lengthens the LIVE-1 bound by the iterations such prefills
take (spec/eventlog.md 4.2); undeclared, a correct engine's long prefill reads as LIVE-1."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eventlog_v2 import header, iteration, write

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.reference.bound import RunBound
from kvsched.spec.properties import (
    PropertiesError,
    TargetProperties,
    parse_properties,
    properties_to_json,
)
from kvsched.spec.workload import Limits, Request, Workload

CHUNKED = TargetProperties(
    "continuous", admission="lazy", token_budget=32, chunked_prefill=True, preemption=True
)
CAPPED = TargetProperties(
    "continuous",
    admission="lazy",
    token_budget=32,
    chunked_prefill=True,
    preemption=True,
    prefill_chunk=8,
)
ONE = Workload("one", Limits(1, 16, 16), (Request("a", 0, 64, 2),))


def test_the_declaration() -> None:
    assert CHUNKED.prefill_iterations(64) == 2 and CAPPED.prefill_iterations(64) == 8
    assert TargetProperties().prefill_iterations(64) == 0  # the lesson model: one iteration
    wide = TargetProperties("continuous", token_budget=32, chunked_prefill=True, prefill_chunk=99)
    assert wide.prefill_iterations(64) == 2  # a cap above the budget changes nothing
    assert parse_properties(properties_to_json(CAPPED)) == CAPPED
    assert "prefill_chunk" not in properties_to_json(CHUNKED)  # omitted when not declared
    with pytest.raises(PropertiesError, match="prefill_chunk"):
        TargetProperties("continuous", token_budget=32, prefill_chunk=8)
    with pytest.raises(PropertiesError, match="prefill_chunk"):
        TargetProperties("continuous", token_budget=32, chunked_prefill=True, prefill_chunk=0)
    # The run's bound and the monitor's follow the same rule.
    assert RunBound(ONE, CAPPED).value - RunBound(ONE, CHUNKED).value == 8 - 2


def eight_chunks() -> list[dict[str, object]]:
    """a computes its 64-token prompt 8 tokens at a time, then decodes its second token."""
    lines, free = [], 16
    for n in range(1, 9):
        ops: list[object] = [["admit", "a"]] if n == 1 else []
        if n % 2:  # every other chunk starts a page of 16 tokens
            ops.append(["alloc", "a", [n // 2]])
            free -= 1
        ops.append(["compute", "a", 8])
        if n == 8:
            ops.append(["token", "a"])
        lines.append(iteration(n, ops, free))
    last = [["alloc", "a", [4]], ["decode", ["a"]], ["finish", "a"], ["free", "a", [0, 1, 2, 3, 4]]]
    return [*lines, iteration(9, last, 16)]


def test_a_capped_prefill_is_live_only_when_declared(tmp_path: Path) -> None:
    capped = write(tmp_path / "capped.jsonl", header(ONE, CAPPED), *eight_chunks())
    checked = check_stream(capped, all_findings=True)
    assert checked.finding is None, checked.finding
    # Undeclared, the bound is 0 + 2 output tokens + ceil(64 / 32) prefill iterations = 4.
    undeclared = write(tmp_path / "undeclared.jsonl", header(ONE, CHUNKED), *eight_chunks())
    found = check_stream(undeclared).finding
    assert found is not None and (found.invariant, found.iteration) == ("LIVE-1", 5)
