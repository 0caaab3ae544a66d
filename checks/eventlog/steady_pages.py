"""Who holds which page while the fast path (:mod:`.steady`) takes lines in, told to the
monitor's page ledger only when the full path takes over.

The ledger (:class:`~kvsched.checks.monitor.pages.PageLedger`) keeps a set of holders for every
page held, made page by page. The fast path takes in lines whose pages are fresh or given back
whole, so it keeps only the changes since the ledger was last told: the pages taken since, the
ledger's pages given back since, and the requests whose tables changed. Most requests come and go
within the lines it takes in, and their pages never reach the ledger. :meth:`DeferredPages.tell`
brings the ledger up to date, at a cost that follows the changes, not the pool.

Without prefix sharing a page has one holder (:class:`DeferredPages`). With it
(:class:`SharedPages`) an admitted request's table may begin with pages others hold, or that
were given back and kept for their content: each page's holders are then counted, as changes
to the ledger's count since it was last told.

The tables the log builds are the reader's (``Lowering.tables``), which the fast path keeps
current; the ledger's are the requests' records' (``RequestRecord.table``), as last told.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Final

from kvsched.checks.monitor.pages import PageLedger

_DONE: Final = -(1 << 40)
"""A page's mark in :attr:`SharedPages.counted` once :meth:`SharedPages.held_after` has counted
it given back: no page has that many holders."""


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
        self.ended: dict[str, tuple[int, ...]] = {}
        """The tables the ledger was last told of requests finished or preempted since: a
        finished one's record may be forgotten before it is told again, and a preempted one's
        table begins again."""

    def held(self) -> int:
        """Pages held now."""
        return len(self.ledger.holders) - len(self.given) + len(self.taken)

    def released(self, given: Mapping[str, tuple[int, ...]]) -> set[int]:
        """The pages free once the requests preempted gave back ``given``, each its whole
        table: without prefix sharing, every one of them."""
        pages: set[int] = set()
        for table in given.values():
            pages.update(table)
        return pages

    def held_after(
        self,
        fresh: set[int],
        shared: Mapping[str, tuple[int, ...]],
        frees: Mapping[str, tuple[int, ...]],
        freed: int,
        released: int = 0,
    ) -> tuple[int, int]:
        """Pages held once a line's schedule gave back ``released`` pages (its preemptions'),
        took ``fresh`` (shown free) and ``shared``, and once its finished requests gave back
        ``frees``, ``freed`` pages in all: each its giver's alone, and none shared without
        prefix sharing."""
        scheduled = self.held() - released + len(fresh)
        return scheduled, scheduled - freed

    def share(self, shared: Mapping[str, tuple[int, ...]]) -> None:
        """Pages taken by reference: none without prefix sharing (the line is declined)."""
        if shared:
            raise AssertionError("a page shared in a log that declares no prefix sharing")

    def all_free(self, pages: set[int]) -> bool:
        """Whether no one holds any of ``pages`` now."""
        if not self.taken.isdisjoint(pages):
            return False
        held = self.ledger.holders.keys()
        return held.isdisjoint(pages - self.given if self.given else pages)

    def take(self, rids: Iterable[str], pages: Collection[int]) -> None:
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
        if told := self.told(rid):
            self.changed.add(rid)
            self.ended[rid] = told
        else:
            self.changed.discard(rid)

    def told(self, rid: str) -> tuple[int, ...]:
        """``rid``'s table as the ledger was last told it."""
        record = self.ledger.records.get(rid)
        return () if record is None else record.table

    def tell(self) -> None:
        """Bring the ledger's holders and tables up to date, and start over."""
        if not self.changed:
            return
        ledger, tables, records = self.ledger, self.tables, self.ledger.records
        holders, ended = ledger.holders, self.ended
        for page in self.given:
            del holders[page]
        for rid in self.changed:
            record = records.get(rid)
            table = tables.get(rid)
            if table is None:
                if record is not None:
                    record.table = ()
                continue
            assert record is not None  # a request of the batch has its record
            # Tables only grow at their end in scope: the pages past the ledger's are new. A
            # table given back since (a preemption, its pages in given) begins again.
            for page in table[0 if rid in ended else len(record.table) :]:
                holders[page] = {rid}
            record.table = table
        ended.clear()  # their pages were given
        self.taken.clear()
        self.given.clear()
        self.changed.clear()


class SharedPages(DeferredPages):
    """The changes since the ledger was last told where pages are shared: each page's holders
    counted, as the change since (:attr:`delta`) to the ledger's count of them."""

    def __init__(self, ledger: PageLedger, tables: dict[str, tuple[int, ...]]) -> None:
        super().__init__(ledger, tables)
        self.delta: list[int] = [0] * ledger.pool_pages
        """The change in each page's holders since the ledger was last told, by page id. A
        list, not a dict: every page the fast path moves is in the pool (steady_ops.py checks
        each one it allocates, shares or frees), and a compiled list read or write by index
        boxes nothing, where a dict keyed by page boxes and hashes the page each time."""
        self.moved: list[int] = []
        """The pages whose :attr:`delta` left 0 since the ledger was last told: those
        :meth:`tell` resets, not the whole pool (up to 2**20 pages) for every line declined."""
        self.net = 0
        """The change in the pages held since the ledger was last told."""
        self.counted: list[int] = [0] * ledger.pool_pages
        """Scratch for :meth:`held_after`, by page id: 0 for every page between its calls."""
        self.marked: list[int] = []
        """The pages :meth:`held_after` moved in :attr:`counted`, to put back to 0."""

    def holders(self, page: int) -> int:
        held = self.ledger.holders.get(page)
        return (0 if held is None else len(held)) + self.delta[page]

    def held(self) -> int:
        return len(self.ledger.holders) + self.net

    def all_free(self, pages: set[int]) -> bool:
        return all(self.holders(page) == 0 for page in pages)

    def released(self, given: Mapping[str, tuple[int, ...]]) -> set[int]:
        """The pages free once the requests preempted gave back ``given``, each its whole
        table: those no one else holds."""
        counted, marked = self.counted, self.marked
        for table in given.values():
            for page in table:
                count = counted[page]
                if not count:
                    marked.append(page)
                counted[page] = count + 1
        pages = {page for page in marked if self.holders(page) == counted[page]}
        for page in marked:
            counted[page] = 0
        marked.clear()
        return pages

    def held_after(
        self,
        fresh: set[int],
        shared: Mapping[str, tuple[int, ...]],
        frees: Mapping[str, tuple[int, ...]],
        freed: int,
        released: int = 0,
    ) -> tuple[int, int]:
        """Pages held once a line's schedule gave back ``released`` pages (its preemptions'),
        took ``fresh`` (shown free) and ``shared``, and once its finished requests gave back
        ``frees``: a page is held while anyone holds it. A page a preemption gave back is not
        among those the line shares or its finished requests give back (steady.py)."""
        scheduled = self.held() - released + len(fresh)
        # Each page's holders the line adds less those it gives back, counted in a list by page
        # id (:attr:`counted`, all 0 between calls), not a dict: a dict boxed and hashed each
        # page. The pages counted are put back to 0 before returning.
        counted, marked = self.counted, self.marked
        for pages in shared.values():
            for page in pages:
                count = counted[page]
                if not count:
                    marked.append(page)
                    scheduled += self.holders(page) == 0
                counted[page] = count + 1
        end = scheduled
        if frees:
            for page in fresh:
                if not counted[page]:
                    marked.append(page)
                counted[page] = 1
            given: list[int] = []
            for pages in frees.values():
                for page in pages:
                    count = counted[page]
                    if not count:
                        marked.append(page)
                    counted[page] = count - 1
                    given.append(page)
            # A page given back is free at the end if no holder is left: the ledger's, the
            # change since, and the line's all given back. Each page counted once (_DONE).
            for page in given:
                count = counted[page]
                if count != _DONE:
                    end -= self.holders(page) + count == 0
                    counted[page] = _DONE
        for page in marked:
            counted[page] = 0
        marked.clear()
        return scheduled, end

    def take(self, rids: Iterable[str], pages: Collection[int]) -> None:
        delta, moved = self.delta, self.moved
        for page in pages:
            count = delta[page]
            if not count:
                moved.append(page)
            delta[page] = count + 1
        self.net += len(pages)
        self.changed.update(rids)

    def share(self, shared: Mapping[str, tuple[int, ...]]) -> None:
        delta, excuse = self.delta, self.ledger.excuse_sharing
        moved = self.moved
        for pages in shared.values():
            for page in pages:
                held = self.holders(page) > 0
                excuse(held)
                if not held:
                    self.net += 1
                count = delta[page]
                if not count:
                    moved.append(page)
                delta[page] = count + 1
        self.changed.update(shared)

    def give_back(self, rid: str, pages: tuple[int, ...]) -> None:
        delta, moved = self.delta, self.moved
        for page in pages:
            count = delta[page]
            if not count:
                moved.append(page)
            delta[page] = count - 1
            if self.holders(page) == 0:
                self.net -= 1
        if told := self.told(rid):
            self.changed.add(rid)
            self.ended[rid] = told
        else:
            self.changed.discard(rid)

    def tell(self) -> None:
        """The ledger's holders made those of the tables as they are: a table that changed
        leaves the pages it no longer holds and joins those it now holds."""
        delta = self.delta
        for page in self.moved:
            delta[page] = 0
        self.moved.clear()
        self.net = 0
        if not self.changed:
            return  # every table that changed since came and went: its changes cancel
        ledger, tables, records = self.ledger, self.tables, self.ledger.records
        holders = ledger.holders
        for rid in self.changed:
            table = tables.get(rid, ())
            record = records.get(rid)
            before = self.ended.get(rid, () if record is None else record.table)
            if not table:  # it finished since (most that changed and did not only grow): no
                for page in before:  # set of what it keeps, nor of what it had, is needed
                    _leave(holders, page, rid)
            elif table[: len(before)] == before:
                for page in table[len(before) :]:
                    holders.setdefault(page, set()).add(rid)
            else:
                kept = set(table)
                for page in before:
                    if page not in kept:
                        _leave(holders, page, rid)
                had = set(before)
                for page in table:
                    if page not in had:
                        holders.setdefault(page, set()).add(rid)
            if record is not None:
                record.table = table
        self.changed.clear()
        self.ended.clear()


def _leave(holders: dict[int, set[str]], page: int, rid: str) -> None:
    """``rid`` no longer holds ``page``, which the ledger's ``holders`` show it holding."""
    owners = holders[page]
    owners.discard(rid)
    if len(owners) == 0:  # compiled, a set's size is read inline, its truth by a call
        del holders[page]
