"""Who holds which page while the fast path (:mod:`.steady`) takes lines in, told to the
monitor's page ledger only when the full path takes over.

The ledger (:class:`~kvsched.checks.monitor.pages.PageLedger`) keeps a set of holders for every
page held, made page by page. The fast path takes in lines whose pages are fresh or given back
whole, with one holder each (no prefix sharing is in its scope), so it keeps only the changes
since the ledger was last told: the pages taken since, the ledger's pages given back since, and
the requests whose tables changed. Most requests come and go within the lines it takes in, and
their pages never reach the ledger. :meth:`DeferredPages.tell` brings the ledger up to date, at a
cost that follows the changes, not the pool.

The tables themselves are the reader's (``Lowering.tables``), which the fast path keeps as the
log builds them: the one record of each request's pages while it is engaged.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvsched.checks.monitor.pages import PageLedger


class DeferredPages:
    """The pages taken and given back since :attr:`ledger` was last told."""

    def __init__(self, ledger: PageLedger, tables: dict[str, tuple[int, ...]]) -> None:
        self.ledger, self.tables = ledger, tables
        self.taken: set[int] = set()
        """Pages taken since, still held (the ledger does not know them)."""
        self.given: set[int] = set()
        """Pages the ledger holds that were given back since."""
        self.changed: set[str] = set()
        """Requests whose tables changed since."""

    def held(self) -> int:
        """Pages held now."""
        return len(self.ledger.holders) - len(self.given) + len(self.taken)

    def all_free(self, pages: set[int]) -> bool:
        """Whether no one holds any of ``pages`` now."""
        if not self.taken.isdisjoint(pages):
            return False
        held = self.ledger.holders.keys()
        return held.isdisjoint(pages - self.given if self.given else pages)

    def take(self, rids: Iterable[str], pages: Iterable[int]) -> None:
        """``pages``, shown free, joined the tables of ``rids``."""
        self.taken.update(pages)
        self.changed.update(rids)

    def give_back(self, rid: str, pages: tuple[int, ...]) -> None:
        """``rid`` finished and gave back ``pages``, shown to be its whole table."""
        taken = self.taken
        before = len(taken)
        taken.difference_update(pages)
        if before - len(taken) < len(pages):  # some were held when the ledger was last told
            holders = self.ledger.holders
            self.given.update(p for p in pages if p in holders)
        # The ledger forgets a table it knows; one it never knew leaves nothing to tell, and
        # the memory kept follows the live requests however long the log.
        if rid in self.ledger.tables:
            self.changed.add(rid)
        else:
            self.changed.discard(rid)

    def tell(self) -> None:
        """Bring the ledger's holders and tables up to date, and start over."""
        if not self.changed:
            return
        ledger, tables = self.ledger, self.tables
        holders, known = ledger.holders, ledger.tables
        for page in self.given:
            del holders[page]
        for rid in self.changed:
            table = tables.get(rid)
            if table is None:
                known.pop(rid, None)
                continue
            # Tables only grow at their end in scope: the pages past the ledger's are new.
            for page in table[len(known.get(rid, ())) :]:
                holders[page] = {rid}
            known[rid] = table
        self.taken.clear()
        self.given.clear()
        self.changed.clear()
