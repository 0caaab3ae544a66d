"""The monitor's page ledger: who holds which physical page, kept incrementally (PAGE-1..PAGE-5).

It keeps, for every page held, the set of requests whose tables contain it (one request, or
several for a page shared by prefix caching), and moves each request's table, which lives on
the request's record (:mod:`kvsched.reference.record`). From those it knows the free count
without scanning the pool: the usable pages minus the pages held. A table is compared
in full only when it changed (it gained pages, or its length or last page moved); every other
check is per page named in the event, so the cost follows the iteration, not the pool.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from kvsched.checks.monitor.excuses import Tally
from kvsched.checks.monitor.findings import Finding, page_list, request_list
from kvsched.reference.record import Records
from kvsched.spec.events import IterationEvent
from kvsched.spec.properties import TargetProperties
from kvsched.spec.text import plural
from kvsched.spec.workload import Limits, pages_for


class PageLedger:
    """Page tables and page holders, as the events report them."""

    def __init__(
        self,
        limits: Limits,
        properties: TargetProperties,
        records: Records,
        tally: Tally | None = None,
    ) -> None:
        self.page_size = limits.page_size
        self.pool_pages = limits.pool_pages
        self.usable = properties.usable_pages(limits)
        self.reserved = frozenset(properties.reserved_pages)
        self.sharing = properties.prefix_sharing
        self.records = records
        """The requests' records, whose tables this ledger moves."""
        self.holders: dict[int, set[str]] = {}  # held pages only: a free page has no entry
        self.given_back: dict[int, int] = {}
        """Under asynchronous scheduling, each page an update gave back to the pool (held by no
        one after the iteration's frees), with the iteration, for the last two iterations; kept
        by PAGE-7's check (:mod:`.fenced`)."""
        self.tally = tally if tally is not None else Tally()

    def held_as_scheduled(self, event: IterationEvent) -> int:
        """The distinct pages ``event``'s batch held while it ran (its ``pages_in_use``), once
        the event is judged: those held now, and those its update freed that no one holds now.
        What the meter reads on a checked run instead of counting the tables again."""
        holders = self.holders
        gone = {page for pages in event.freed.values() for page in pages if page not in holders}
        return len(holders) + len(gone)

    @property
    def free(self) -> int:
        """Pages a correct pool counts as free: usable pages not in any table (PAGE-3)."""
        return self.usable - len(self.holders)

    def room(self, n: int) -> int:
        """Pages iteration ``n``'s schedule could take: the free ones (PAGE-3), less, under
        asynchronous scheduling, those the update of iteration ``n - 1`` gave back, which wait
        for the step in flight (PAGE-7, :mod:`.fenced`)."""
        given = self.given_back
        if not given:
            return self.free
        holders, fenced = self.holders, 0
        for page, at in given.items():
            if at == n - 1 and page not in holders:
                fenced += 1
        return self.free - fenced

    def grow(
        self, n: int, rid: str, pages: tuple[int, ...], shared: bool, batch: Collection[str]
    ) -> Finding | None:
        """``pages`` join the end of ``rid``'s table, fresh or (``shared``) by reference."""
        if rid not in batch:
            return _found(
                "PAGE-4",
                n,
                f"request {rid!r} got pages {page_list(pages)} in iteration {n} but is not in "
                "the batch",
                pages,
                rid,
            )
        return self._add(n, rid, pages, pages if shared else ())

    def take_fresh(self, rid: str, pages: tuple[int, ...]) -> None:
        """``pages`` join the end of ``rid``'s table, already shown to pass :meth:`grow`'s
        checks: in the pool, not reserved, held by no one, and ``rid`` in the batch."""
        holders = self.holders
        for page in pages:
            holders[page] = {rid}
        record = self.records.live[rid]
        record.table += pages

    def _add(
        self, n: int, rid: str, added: tuple[int, ...], shared: Iterable[int]
    ) -> Finding | None:
        by_reference = set(shared) if self.sharing else set()
        second: Finding | None = None
        for page in added:
            if not 0 <= page < self.pool_pages:
                return _found(
                    "PAGE-5",
                    n,
                    f"request {rid!r} got page {page} in iteration {n}, "
                    f"outside the pool (ids 0 to {self.pool_pages - 1})",
                    [page],
                    rid,
                )
            if page in self.reserved:
                return _found(
                    "PAGE-5",
                    n,
                    f"request {rid!r} got page {page} in iteration {n}, "
                    "a reserved id the pool never hands out",
                    [page],
                    rid,
                )
            owners = self.holders.setdefault(page, set())
            if rid in owners:
                return _found(
                    "PAGE-2",
                    n,
                    f"page {page} appears twice in the table of request {rid!r} in iteration {n}",
                    [page],
                    rid,
                )
            if owners and page not in by_reference:
                # Held by both from now on, as the target's tables say: checking on after the
                # finding judges those tables, not a page missing from the newcomer's.
                others = sorted(owners)
                second = second or _found(
                    "PAGE-2",
                    n,
                    f"page {page} went to request {rid!r} in iteration "
                    f"{n} while {request_list(others)} still held it, and was not declared "
                    "a shared (prefix-cached) page",
                    [page],
                    rid,
                    *others,
                )
            else:
                self.excuse_sharing(bool(owners))
            owners.add(rid)
        record = self.records.live[rid]  # in the batch: shown by grow()
        record.table += added
        return second

    def excuse_sharing(self, held: bool) -> None:
        """A page taken by reference, ``held`` by others already: a second holder, which the
        declared prefix sharing excuses (PAGE-2), counted for the verdict."""
        self.tally.shared_pages += held

    def lose(self, n: int, rid: str, pages: tuple[int, ...]) -> Finding | None:
        """``pages`` left ``rid``'s table with no free to explain it (PAGE-3). They are taken
        out of the ledger, so a run checked on after the finding sees the table it reported."""
        record, gone = self.records.get(rid), set(pages)
        if record is not None:
            record.table = tuple(p for p in record.table if p not in gone)
        for page in gone:
            owners = self.holders.get(page)
            if owners is not None:
                owners.discard(rid)
                if not owners:
                    del self.holders[page]
        return _found(
            "PAGE-3",
            n,
            f"page {pages[0]} left the table of request {rid!r} in iteration {n} without being "
            "freed: it is now neither held nor free",
            [pages[0]],
            rid,
        )

    def release(self, n: int, rid: str, pages: Sequence[int], why: str) -> Finding | None:
        """``rid`` gives back ``pages``; each must be in its table exactly once (PAGE-3)."""
        released: set[int] = set()
        holders = self.holders
        for page in pages:
            owners = holders.get(page)  # None: free (no empty set made for each page held)
            if page in released:
                return _found(
                    "PAGE-3",
                    n,
                    f"request {rid!r} freed page {page} twice in "
                    f"iteration {n} ({why}): a double free",
                    [page],
                    rid,
                )
            if owners is None or rid not in owners:
                holding = sorted(owners) if owners else []
                held_by = f"held by {request_list(holding)}" if holding else "already free"
                return _found(
                    "PAGE-3",
                    n,
                    f"request {rid!r} freed page {page} in iteration {n} "
                    f"({why}) but does not hold it; the page is {held_by} (a double "
                    "free or reference-count underflow)",
                    [page],
                    rid,
                    *holding,
                )
            released.add(page)
        for page in released:
            owners = holders[page]
            owners.discard(rid)
            if len(owners) == 0:  # compiled, a set's size is read inline, its truth by a call
                del holders[page]
        record = self.records.get(rid)
        if released and record is not None:
            record.table = tuple(p for p in record.table if p not in released)
        return None

    def drop(self, n: int, rid: str, why: str) -> Finding | None:
        """``rid`` left the batch (``why``): PAGE-4 if it still holds a page, else forget it."""
        record = self.records.get(rid)
        if record is None or not record.table:
            return None
        kept, record.table = record.table, ()
        return _found(
            "PAGE-4",
            n,
            f"request {rid!r} {why} in iteration {n} but still holds "
            f"pages {page_list(kept)}: they are never returned to the pool",
            kept,
            rid,
        )

    def coverage(self, n: int, rid: str, kv_tokens: int, most: int | None) -> Finding | None:
        """PAGE-1: the table holds the KV, and no more than ``most`` pages (None: minimal)."""
        record = self.records.get(rid)
        held = 0 if record is None else len(record.table)
        needed = pages_for(kv_tokens, self.page_size)
        if held < needed:
            return _found(
                "PAGE-1",
                n,
                f"request {rid!r} has KV for {plural(kv_tokens, 'token')} in iteration {n}, "
                f"which needs {plural(needed, 'page')} of {plural(self.page_size, 'slot')}, but "
                f"holds {plural(held, 'page')}: KV written past the pages held",
                (),
                rid,
            )
        if most is None and held > needed:
            return _found(
                "PAGE-1",
                n,
                f"request {rid!r} holds {plural(held, 'page')} in iteration {n} for "
                f"{plural(kv_tokens, 'token')}, where {plural(needed, 'page')} of "
                f"{plural(self.page_size, 'slot')} would do (pages are taken as needed, and no "
                "more)",
                (),
                rid,
            )
        if held > needed and most is not None and held <= most:  # within its reservation
            self.tally.over_reservation(held - needed)
        if most is not None and held > most:
            return _found(
                "PAGE-1",
                n,
                f"request {rid!r} holds {plural(held, 'page')} in iteration {n}, more than the "
                f"{most} its reservation may span",
                (),
                rid,
            )
        return None

    def check_free(
        self, n: int, reported: int, event: IterationEvent, where: Callable[[str], str]
    ) -> Finding | None:
        """PAGE-3: the scheduler's free count equals the usable pages minus the pages held.

        The count was right after the iteration before (this check runs in every one), so the
        pages in the difference changed hands in ``event``: the finding names them and their
        holder, whose state ``where`` words (waiting, finished, ...), or says that no table
        showed them."""
        if reported == self.free:
            return None
        message = (
            f"the scheduler counts {plural(reported, 'free page')} after iteration {n}, but "
            f"{plural(self.usable, 'usable page')} minus {plural(len(self.holders), 'page')} "
            f"held leaves {self.free}"
        )
        if reported < self.free:
            why, pages, requests = self._still_counted(self.free - reported, event, where)
        else:
            why, pages, requests = self._counted_free(reported - self.free, event, where)
        return _found("PAGE-3", n, f"{message}: {why}", pages, *requests)

    def _still_counted(
        self, short: int, event: IterationEvent, where: Callable[[str], str]
    ) -> tuple[str, list[int], list[str]]:
        """The count is ``short`` pages short: pages no table holds that the target counts as
        used. Those given back in this iteration (a preempted or finished request's) first."""
        given: dict[int, str] = {}  # page given back and free now -> who gave it back
        frees = [(op.request, op.pages) for op in event.schedule if op.kind == "free"]
        for rid, pages in (*frees, *event.freed.items()):
            for page in pages:
                if page not in self.holders:
                    given[page] = rid
        counted = f"{plural(short, 'page')} that no table holds {_are(short)} counted as used"
        if not given:
            unheld = (p for p in range(self.pool_pages) if p not in self.holders)
            free = [p for p in unheld if p not in self.reserved][:8]
            return (
                f"{counted}, and no table gave back a page in this iteration: held by nobody "
                "the events show (taken for a request outside the batch, or never given back); "
                f"free by the tables: {_pages(free)}",
                free,
                [],
            )
        whose, requests = _whose(given, event, where)
        if len(given) > short:
            said = f"{counted}, among those given back in this iteration, free by the tables: "
            return said + whose, list(given)[:8], requests
        rest = f"; the other {short - len(given)} held by nobody the events show" * (
            len(given) < short
        )
        said = f"{counted}: given back in this iteration, and free by the tables, {whose}{rest}"
        return said, list(given)[:8], requests

    def _counted_free(
        self, extra: int, event: IterationEvent, where: Callable[[str], str]
    ) -> tuple[str, list[int], list[str]]:
        """The count has ``extra`` pages too many: pages a table holds that the target counts
        as free. Those taken in this iteration first."""
        taken: dict[int, str] = {}
        for op in event.schedule:
            if op.kind in ("alloc", "share"):
                taken.update((page, op.request) for page in op.pages if page in self.holders)
        counted = f"{plural(extra, 'page')} that a table holds {_are(extra)} counted as free"
        if not taken:  # then any page held: name the first few holders
            taken = {page: min(owners) for page, owners in sorted(self.holders.items())[:8]}
            whose, requests = _whose(taken, event, where)
            said = f"{counted}, among the pages held (none was taken in this iteration): "
            return said + whose, list(taken), requests
        whose, requests = _whose(taken, event, where)
        if len(taken) > extra:
            said = f"{counted}, among those taken in this iteration: {whose}"
        else:
            said = f"{counted}: taken in this iteration, {whose}"
        return said, list(taken)[:8], requests


def _whose(
    pages: dict[int, str], event: IterationEvent, where: Callable[[str], str]
) -> tuple[str, list[str]]:
    """Pages by who gave them back or took them, in words, and the first few of those."""
    holders = list(dict.fromkeys(pages.values()))[:5]
    words = "; ".join(
        f"{_pages([p for p, r in pages.items() if r == rid])} by request {rid!r} "
        f"({_state(rid, event, where)})"
        for rid in holders
    )
    return words, holders


def _are(count: int) -> str:
    return "is" if count == 1 else "are"


def _pages(pages: Sequence[int]) -> str:
    """``page 3`` or ``pages 0, 1``: page ids for a finding's message, with their noun."""
    return f"page{'' if len(pages) == 1 else 's'} {page_list(pages)}"


def _state(rid: str, event: IterationEvent, where: Callable[[str], str]) -> str:
    """A request's state for a page-count finding: how it came to give back or take pages."""
    if rid in event.preempted:
        return f"preempted, now {where(rid)}"
    return where(rid)


def _found(
    invariant: str, iteration: int, message: str, pages: Iterable[int], *requests: str
) -> Finding:
    return Finding(invariant, iteration, message, requests=requests, pages=tuple(pages))
