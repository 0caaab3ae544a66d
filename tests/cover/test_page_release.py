"""The page ledger's check of a give-back (``PageLedger.release``, PAGE-3): a page given back
twice, by a request that does not hold it, or that no one holds, is named with who holds it; a
give-back of pages held leaves them free and the table without them."""

from __future__ import annotations

from test_steady_pages import admit, ledger

from kvsched.spec.workload import Limits


def test_a_give_back_of_pages_not_held_names_who_holds_them() -> None:
    pages = ledger(Limits(batch_limit=4, page_size=4, pool_pages=8), sharing=True)
    admit((pages,), "a")
    admit((pages,), "b")
    pages.take_fresh("a", (1, 2))

    found = pages.release(3, "b", (2,), "freed")  # held by another
    assert found is not None and found.invariant == "PAGE-3"
    assert "does not hold it; the page is held by" in found.message
    assert (found.requests, found.pages) == (("b", "a"), (2,))

    found = pages.release(3, "b", (5,), "freed")  # held by no one
    assert found is not None and "the page is already free" in found.message
    assert (found.requests, found.pages) == (("b",), (5,))

    found = pages.release(3, "a", (1, 1), "finished")
    assert found is not None and "freed page 1 twice" in found.message
    assert pages.holders == {1: {"a"}, 2: {"a"}}  # nothing given back on a finding

    assert pages.release(3, "a", (2, 1), "finished") is None
    assert pages.holders == {} and pages.records.live["a"].table == ()
