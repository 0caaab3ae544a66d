"""Workload synthesis (checks/proofs/synthesis.py, `kvsched synth`): every answer holds under the
reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsched.checks.proofs import synthesis as synth
from kvsched.checks.proofs.synthesis import SearchSpace
from kvsched.cli import main
from kvsched.reference import POLICIES, run
from kvsched.reference.metrics import admission_iterations
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload, load_workload

SMALL = SearchSpace(requests=4, max_prompt=40, max_output=12, max_arrival=12)


def test_reuse_is_read_from_the_events() -> None:
    # Pool of 4 pages of 16: a holds 4 pages and frees them; b and c then need 4 new pages while
    # only 0 were free before a's pages came back.
    w = Workload(
        "r",
        Limits(3, 16, 4),
        (Request("a", 0, 48, 1), Request("b", 0, 16, 2), Request("c", 0, 20, 1)),
    )
    events = run(w, POLICIES["continuous"], "continuous").events
    tightest = synth.reuses(events)[0]
    assert (tightest.iteration, tightest.freed, tightest.free_before) == (2, 4, 0)
    assert tightest.taken == 4 and synth.reuse_shortfall(w) == 4


def test_the_teaching_trace_never_needs_reuse_at_once() -> None:
    # Its pool is large enough never to bind (spec/traces/README.md).
    assert synth.reuse_shortfall(load_teaching_trace()) <= 0


@pytest.mark.parametrize("method", ["z3", "hypothesis"])
def test_reuse_is_found_and_verified(method: str) -> None:
    space = SearchSpace(requests=3, pool_pages=6, max_prompt=40, max_output=6, max_arrival=4)
    if method == "z3":
        answer = synth.answer_reuse_by_z3(space)
    else:
        answer = synth.answer_reuse_by_hypothesis(space, examples=500)
    assert answer.workload is not None
    assert answer.workload.limits.pool_pages == 6
    assert synth.reuse_shortfall(answer.workload) > 0


def test_reuse_cannot_happen_when_the_pool_never_binds() -> None:
    # Two requests of at most 2 + 2 tokens in pages of 16 commit at most 2 pages of 8.
    space = SearchSpace(requests=2, pool_pages=8, max_prompt=2, max_output=2, max_arrival=2)
    answer = synth.answer_reuse_by_z3(space)
    assert answer.workload is None and answer.verdict.startswith("none exists")


def test_the_iteration_gap_search_returns_a_verified_gap() -> None:
    answer = synth.answer_iteration_gap(SMALL, examples=60)
    assert answer.workload is not None and len(answer.workload.requests) == 4
    metrics = dict(answer.metrics)
    gap = metrics["static"].iterations - metrics["continuous"].iterations
    assert gap > 0 and f"{gap} more iterations" in answer.verdict


def test_continuous_batching_loses_on_peak_pages_but_not_on_waits() -> None:
    answer = synth.answer_continuous_loses(SMALL, examples=60)
    assert answer.workload is not None
    metrics = dict(answer.metrics)
    assert metrics["continuous"].peak_pages > metrics["static"].peak_pages
    static = admission_iterations(run(answer.workload, POLICIES["static"]).events)
    continuous = admission_iterations(run(answer.workload, POLICIES["continuous"]).events)
    assert all(continuous[r] <= static[r] for r in static)


def test_no_p95_inversion_is_proved() -> None:
    answer = synth.answer_p95_inversion(3)
    assert answer.workload is None and answer.verdict.startswith("none exists")


def test_a_claim_the_reference_denies_is_never_returned() -> None:
    w = load_teaching_trace()
    with pytest.raises(RuntimeError, match="fails its claim"):
        synth._verified("q", "c", "m", 0.0, w, lambda m, w: False, "")


def test_synth_writes_a_loadable_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reuse.json"
    args = ["synth", "reuse", "--requests", "3", "--max-output", "4", "--max-arrival", "3"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verified with the reference engine" in printed and "Z3" in printed
    assert synth.reuse_shortfall(load_workload(out)) > 0


def test_synth_json_names_the_method(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["synth", "iteration-gap", "--requests", "3", "--examples", "30", "--json"]
    assert main(args) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "Hypothesis" in answer["method"] and answer["workload"]["format"] == 1
    assert answer["metrics"]["static"]["iterations"] > answer["metrics"]["continuous"]["iterations"]


def test_synth_p95_inversion_answers_with_a_proof(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "p95-inversion", "--requests", "3"]) == 0
    assert "none exists" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--requests", "0"], "--requests must be >= 1"),
        (["--max-arrival", "-1"], "--max-arrival must be >= 0"),
        (["--method", "z3"], "--method applies to the 'reuse' question only"),
    ],
)
def test_synth_rejects_bad_arguments(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["synth", "iteration-gap", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_no_p95_inversion_for_twelve_requests() -> None:
    answer = synth.answer_p95_inversion(12)
    assert answer.verdict.startswith("none exists")
