"""Z3 budgets are resource units, not seconds (checks/proofs/budgets.py): a proof's verdict must
not depend on how busy the machine is.

A budget too small comes back *not proved* every time, for the same reason, after the same work;
the shipped budget proves the same query; and (``slow``) every shipped budget is at least ten
times what its queries consume at the default sizes, the headroom budgets.py documents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest

from kvsched.checks.proofs.bmc import Bounds, check_drains, find_violation
from kvsched.checks.proofs.budgets import DEFAULT, Budgets
from kvsched.checks.proofs.engine.claims import no_thrash
from kvsched.checks.proofs.engine.induction import prove_safety
from kvsched.checks.proofs.engine.liveness import prove_no_thrash
from kvsched.checks.proofs.engine.results import BATCHINGS, NO_THRASH_DESIGNS, EnginePlan
from kvsched.checks.proofs.engine.unroll import EngineBounds, search
from kvsched.checks.proofs.induction import prove_inductive
from kvsched.checks.proofs.model import BROKEN, Rules
from kvsched.checks.proofs.page_lemmas import LEMMAS, prove_lemma
from kvsched.checks.proofs.query import EXHAUSTED, NOT_PROVED, PROVED
from kvsched.cli import main

BOUNDARY = next(lemma for lemma in LEMMAS if lemma.name == "new-page-at-boundary")
"""The costliest page lemma (about 118,000 units), so a small budget stops it mid-proof."""


def live3(s: Any, before: Any, it: Any, after: Any) -> list[Any]:
    return [no_thrash(it)]


def test_an_exhausted_budget_is_not_proved_every_time_and_the_shipped_budget_proves() -> None:
    starved = [prove_lemma(BOUNDARY, 1_000) for _ in range(3)]
    assert {(a.verdict, a.reason) for a in starved} == {(NOT_PROVED, EXHAUSTED)}
    # The counter stops where the budget ends, whatever the clock says.
    assert all(1_000 <= a.units < 2_000 for a in starved)
    shipped = prove_lemma(BOUNDARY, DEFAULT.lemma)
    assert shipped.verdict == PROVED
    assert shipped.units * 10 <= DEFAULT.lemma


# Z3's counter runs for the whole context, and what a process asked before changes what a query
# costs a little (hash tables, learned lemmas); the same questions from a fresh process cost the
# same units exactly, whatever the load.
SAME_WORK = """
from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.page_lemmas import LEMMAS, prove_lemma
print([prove_lemma(lemma, DEFAULT.lemma).units for lemma in LEMMAS])
print(prove_lemma(LEMMAS[0], 50).reason)
"""


def test_the_same_questions_cost_the_same_units_in_every_process() -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", SAME_WORK], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and EXHAUSTED in runs[0], runs


def test_a_search_shares_its_budget_across_depths() -> None:
    # Six depths, none dearer than a third of the whole (about 1.2 M units; the last, 0.39 M):
    # half the whole would see every depth through if each got the budget afresh. Shared, it
    # runs out part way.
    rules, bounds = Rules("continuous"), Bounds(2, 2, 2, 4)
    answer, _ = find_violation(rules, bounds, DEFAULT.bmc)
    assert answer.verdict == PROVED
    starved, none = find_violation(rules, bounds, answer.units // 2)
    assert (starved.verdict, starved.reason, none) == (NOT_PROVED, EXHAUSTED, None)
    assert starved.units < answer.units


def test_an_engine_search_out_of_budget_is_not_proved() -> None:
    bounds = EngineBounds(page_sizes=(1, 2), horizon=3)
    answer = search("mixed", bounds, live3, 5_000)
    assert (answer.verdict, answer.reason) == (NOT_PROVED, EXHAUSTED)
    assert search("mixed", bounds, live3, DEFAULT.engine_search).verdict == PROVED


def test_scaling_keeps_every_budget_positive() -> None:
    assert DEFAULT.scaled(2).induction == 2 * DEFAULT.induction
    assert min(vars(DEFAULT.scaled(1e-12)).values()) == 1  # an rlimit of 0 is no limit in Z3
    with pytest.raises(ValueError, match="> 0"):
        Budgets().scaled(0)


def test_prove_reports_units_and_a_starved_run_is_not_proved(
    capsys: pytest.CaptureFixture[str],
) -> None:
    small = ["prove", "--requests", "2", "--bmc-requests", "2", "--json"]
    assert main(small) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rlimit_budgets"] == vars(DEFAULT)
    assert all(r["units"] > 0 and r["seconds"] >= 0 for r in report["results"])
    assert main([*small, "--rlimit-scale", "0.00001"]) == 4
    starved = json.loads(capsys.readouterr().out)["results"]
    assert any(EXHAUSTED in r["detail"] for r in starved)


def test_the_old_timeout_option_says_what_replaced_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--timeout", "60"]) == 2
    err = capsys.readouterr().err
    assert "resource units" in err and "--rlimit-scale" in err
    assert main(["prove", "--rlimit-scale", "0"]) == 2
    assert "--rlimit-scale must be > 0" in capsys.readouterr().err


def _within(answers: dict[str, Any], budget: int) -> None:
    spent = {name: a.units for name, a in answers.items()}
    assert all(a.verdict != NOT_PROVED for a in answers.values()), spent
    assert all(units * 10 <= budget for units in spent.values()), (budget, spent)


@pytest.mark.slow
def test_the_shipped_budgets_have_ten_times_headroom_at_the_default_sizes() -> None:
    _within({lemma.name: prove_lemma(lemma, DEFAULT.lemma) for lemma in LEMMAS}, DEFAULT.lemma)
    for policy in ("static", "continuous"):
        obligations = prove_inductive(Rules(policy), 12, DEFAULT.induction)
        _within({f"{o.fact} {o.kind}": o.answer for o in obligations}, DEFAULT.induction)
        _within({"drains": check_drains(Rules(policy), Bounds(), DEFAULT.bmc)}, DEFAULT.bmc)
    broken = {
        name: find_violation(rules, Bounds(), DEFAULT.bmc)[0] for name, rules in BROKEN.items()
    }
    _within(broken, DEFAULT.bmc)
    plan = EnginePlan()
    for batching in BATCHINGS:
        admits = NO_THRASH_DESIGNS[batching]
        for size in plan.page_sizes:
            answers = {
                f"safety {size}": prove_safety(batching, 2, size, DEFAULT.engine_induction),
                f"live {size}": prove_no_thrash(
                    batching, 2, size, DEFAULT.engine_induction, admits
                ),
            }
            _within(answers, DEFAULT.engine_induction)
    searches = {}
    for batching, admits, watermark in (
        *((b, NO_THRASH_DESIGNS[b], None) for b in BATCHINGS),
        *(("prefill-first", True, w) for w in plan.thrash_watermarks),
    ):
        bounds = EngineBounds(
            page_sizes=plan.page_sizes, watermark=watermark, admit_after_preemption=admits
        )
        name = f"{batching} {admits} {watermark}"
        searches[name] = search(batching, replace(bounds, horizon=4), live3, DEFAULT.engine_search)
    _within(searches, DEFAULT.engine_search)
