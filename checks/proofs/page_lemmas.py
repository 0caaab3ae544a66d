"""The page-accounting lemma, proved by Z3 for all integers (spec/semantics.md section 2, PAGE-1).

Every page count in kvsched is ``-(-tokens // page_size)``, written once as
``kvsched.spec.workload.pages_for``.
:func:`ceil_pages` is that same expression over Z3 integers, whose division is Python's floor
division for a positive divisor, so the lemmas below are about the reference's own formula, with
the page size symbolic: no sample of page sizes, no bound on the token count.

Each lemma is proved by asking Z3 for a counterexample and getting ``unsat``. The growth lemmas
(monotone, at most one page per token, never negative) are the only facts about pages that the
transition-system proofs in :mod:`.induction` use: there ``pages`` is an uninterpreted function
constrained by instances of these lemmas, so those proofs hold for every page size at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.query import Answer, prove


def ceil_pages(tokens: Any, page_size: Any) -> Any:
    """``ceil(tokens / page_size)`` exactly as ``pages_for`` writes it: ``-(-t // ps)``."""
    return -((-tokens) / page_size)


@dataclass(frozen=True)
class PageLemma:
    """One claim about :func:`ceil_pages`, for all integers ``tokens`` and ``page_size >= 1``."""

    name: str
    statement: str
    claim: Callable[[Any, Any, Any], Any]
    """Builds the claim from symbolic ``tokens``, ``page_size`` and a free integer ``other``."""
    ids: tuple[str, ...] = ()
    """The catalogue invariants it proves; the others are facts the model proofs use."""


def _capacity(t: Any, ps: Any, _: Any) -> Any:
    return z3.Implies(t >= 0, ceil_pages(t, ps) * ps >= t)


def _wasted(t: Any, ps: Any, _: Any) -> Any:
    wasted = ceil_pages(t, ps) * ps - t
    return z3.And(
        z3.Implies(t > 0, z3.And(wasted >= 0, wasted < ps)),
        z3.Implies(t == 0, z3.And(ceil_pages(t, ps) == 0, wasted == 0)),
    )


def _minimal(t: Any, ps: Any, q: Any) -> Any:
    # No smaller page count holds the tokens: every q below the answer leaves a token out.
    return z3.Implies(z3.And(t >= 0, q >= 0, q < ceil_pages(t, ps)), q * ps < t)


def _monotone(t: Any, ps: Any, u: Any) -> Any:
    return z3.Implies(t <= u, ceil_pages(t, ps) <= ceil_pages(u, ps))


def _one_page_per_token(t: Any, ps: Any, _: Any) -> Any:
    before, after = ceil_pages(t, ps), ceil_pages(t + 1, ps)
    return z3.And(before <= after, after <= before + 1)


def _new_page_exactly_at_boundary(t: Any, ps: Any, _: Any) -> Any:
    # Section 3.3: token t + 1 opens a new page exactly when the t tokens before it fill pages.
    grows = ceil_pages(t + 1, ps) == ceil_pages(t, ps) + 1
    return z3.Implies(t >= 0, grows == (t % ps == 0))


def _never_negative(t: Any, ps: Any, _: Any) -> Any:
    return z3.Implies(t >= 0, ceil_pages(t, ps) >= 0)


LEMMAS: tuple[PageLemma, ...] = (
    PageLemma("capacity", "tokens >= 0 -> pages * page_size >= tokens", _capacity, ("PAGE-1",)),
    PageLemma(
        "wasted",
        "tokens > 0 -> 0 <= wasted < page_size; tokens = 0 -> pages = 0 and wasted = 0",
        _wasted,
        ("PAGE-1",),
    ),
    PageLemma(
        "minimal",
        "0 <= q < pages -> q * page_size < tokens (no smaller count)",
        _minimal,
        ("PAGE-1",),
    ),
    PageLemma("monotone", "t <= u -> pages(t) <= pages(u), all integers", _monotone),
    PageLemma(
        "one-page-per-token", "pages(t) <= pages(t + 1) <= pages(t) + 1", _one_page_per_token
    ),
    PageLemma(
        "new-page-at-boundary",
        "t >= 0 -> (pages(t + 1) = pages(t) + 1 <-> t mod page_size = 0)",
        _new_page_exactly_at_boundary,
    ),
    PageLemma("never-negative", "t >= 0 -> pages(t) >= 0", _never_negative),
)


def prove_lemma(lemma: PageLemma, rlimit: int) -> Answer:
    """Prove one lemma for all integers; the page size is symbolic (any integer >= 1)."""
    tokens, page_size, other = z3.Ints("tokens page_size other")
    return prove([page_size >= 1], lemma.claim(tokens, page_size, other), rlimit)


def lemma_instances(pages: Callable[[Any], Any], context: Any, peak_context: Any) -> list[Any]:
    """The page facts the transition proofs use, at one request's context and peak context.

    For an uninterpreted ``pages`` these are the only axioms the proofs rest on; each is an
    instance of a lemma above ("monotone", "one-page-per-token", "never-negative"), and those
    are proved for all integers and every page size.
    """
    after = context + 1
    return [
        z3.Implies(after <= peak_context, pages(after) <= pages(peak_context)),
        pages(context) <= pages(after),
        pages(after) <= pages(context) + 1,
        z3.Implies(context >= 0, pages(context) >= 0),
    ]
