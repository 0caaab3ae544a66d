"""The page-accounting lemma, proved for all integers (checks/proofs/page_lemmas.py), and honest
verdicts."""

from __future__ import annotations

import pytest
import z3
from hypothesis import given
from hypothesis import strategies as st

from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.page_lemmas import LEMMAS, PageLemma, ceil_pages, prove_lemma
from kvsched.checks.proofs.query import EXHAUSTED, NOT_PROVED, PROVED, REFUTED, prove
from kvsched.reference.page_count import allocate_kv_pages


@pytest.mark.parametrize("lemma", LEMMAS, ids=lambda lemma: lemma.name)
def test_every_page_lemma_is_proved_for_all_integers(lemma: PageLemma) -> None:
    assert prove_lemma(lemma, DEFAULT.lemma).verdict == PROVED


@given(tokens=st.integers(0, 10**6), page_size=st.integers(1, 10**4))
def test_the_z3_term_is_the_references_formula(tokens: int, page_size: int) -> None:
    value = z3.simplify(ceil_pages(z3.IntVal(tokens), z3.IntVal(page_size))).as_long()
    assert value == allocate_kv_pages(tokens, page_size)["pages"]


def test_a_floor_instead_of_a_ceiling_is_refuted_with_a_counterexample() -> None:
    # The classic off-by-one: tokens // page_size drops the partial last page.
    tokens, page_size = z3.Ints("tokens page_size")
    floor_pages = tokens / page_size
    answer = prove([page_size >= 1, tokens >= 0], floor_pages * page_size >= tokens, DEFAULT.lemma)
    assert answer.verdict == REFUTED
    t = answer.model.eval(tokens).as_long()
    ps = answer.model.eval(page_size).as_long()
    assert (t // ps) * ps < t  # the counterexample really loses tokens


def test_wasted_below_a_page_fails_for_a_rounding_up_by_a_whole_page() -> None:
    # (tokens + page_size) // page_size allocates a spare page when the tokens fill their pages.
    broken = PageLemma(
        "wasted-broken",
        "",
        lambda t, ps, _: z3.Implies(t > 0, (t + ps) / ps * ps - t < ps),
    )
    assert prove_lemma(broken, DEFAULT.lemma).verdict == REFUTED


def test_a_question_z3_cannot_decide_within_its_budget_is_not_proved() -> None:
    # x^3 + y^3 = z^3 has no positive solution (Euler), which Z3 can neither find nor refute: it
    # runs out of resource units, and that must read "not proved", never "proved".
    x, y, z = z3.Ints("x y z")
    claim = x * x * x + y * y * y != z * z * z
    answer = prove([x > 0, y > 0, z > 0], claim, 2_000_000)
    assert (answer.verdict, answer.reason) == (NOT_PROVED, EXHAUSTED)
    assert answer.units >= 2_000_000
