"""The fast path's deferred page holders (checks/eventlog/steady_pages.py), and what it keeps to
lower again the lines it took in (steady_recent.py).

:class:`DeferredPages` tells the monitor's page ledger who holds which page only when the full
path takes over. Driven at random beside a ledger kept page by page, it must count the pages
held and say which pages are free as that ledger does at every step, and leave the ledger equal
to it once told; :class:`SharedPages`, where a table may begin with pages others hold, the same,
and its count of what a line leaves held (``held_after``) must be the ledger's after the line. The
last lines taken in are lowered again from the live tables by undoing
them; a line that allocates nothing, or one the reader does not offer the fast path, must still
leave the full path's verdict.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from test_steady import assert_same
from test_steady_lazy import busy_rows

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.steady_pages import DeferredPages, SharedPages
from kvsched.checks.monitor.pages import PageLedger
from kvsched.reference.record import Records
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request

POOL = 24


def ledger(limits: Limits, sharing: bool = False) -> PageLedger:
    properties = TargetProperties(prefix_sharing=sharing)
    return PageLedger(limits, properties, Records(None, limits.page_size))


def admit(ledgers: tuple[PageLedger, ...], rid: str) -> None:
    for each in ledgers:
        each.records.declare(Request(rid, 0, 1, 1))
        each.records.admit(rid)


def finish(ledgers: tuple[PageLedger, ...], rid: str) -> None:
    for each in ledgers:
        each.records.finish(rid)


def tables(ledger: PageLedger) -> dict[str, tuple[int, ...]]:
    """The tables as the ledger knows them, on the records it moves."""
    return {rid: record.table for rid, record in ledger.records.live.items() if record.table}


def test_deferred_pages_agree_with_a_ledger_kept_page_by_page() -> None:
    rng = random.Random(20261201)
    limits = Limits(batch_limit=4, page_size=4, pool_pages=POOL)
    for trial in range(200):
        eager, told = ledger(limits), ledger(limits)
        both = (eager, told)
        live: dict[str, tuple[int, ...]] = {}
        deferred = DeferredPages(told, live)
        free, serial = list(range(POOL)), 0
        for _ in range(rng.randint(1, 60)):
            step = rng.randrange(5)
            for each in both:  # an iteration may begin: the requests finished in it are forgotten
                if step == 4:
                    each.records.begin()
            if step == 0 and free:  # a request is admitted, or grows, with free pages
                rid = rng.choice([*live, f"r{serial}"]) if live else f"r{serial}"
                if rid == f"r{serial}":
                    serial += 1
                    admit(both, rid)
                given = tuple(
                    free.pop(rng.randrange(len(free))) for _ in range(rng.randint(1, 3)) if free
                )
                assert deferred.all_free(set(given))
                live[rid] = live.get(rid, ()) + given
                deferred.take((rid,), given)
                eager.take_fresh(rid, given)
            elif step == 1 and live:  # one finishes, giving back its whole table
                rid = rng.choice(list(live))
                given = live.pop(rid)
                finish(both, rid)
                deferred.give_back(rid, given)
                assert eager.release(0, rid, given, "finished") is None
                eager.drop(0, rid, "finished")
                free += given
            elif step == 2:
                deferred.tell()
                assert told.holders == eager.holders, trial
                assert tables(told) == tables(eager), trial
            elif step == 3:
                page = rng.randrange(POOL)
                assert deferred.all_free({page}) == (page not in eager.holders), trial
            assert deferred.held() == len(eager.holders), trial
            # what is kept to tell follows the live tables, not every request ever seen
            assert deferred.changed <= set(live) | set(deferred.ended), trial
        deferred.tell()
        assert (told.holders, tables(told)) == (eager.holders, tables(eager)), trial


def test_shared_pages_agree_with_a_ledger_kept_page_by_page() -> None:
    rng = random.Random(20261204)
    limits = Limits(batch_limit=4, page_size=4, pool_pages=POOL)
    for trial in range(300):
        eager, told = ledger(limits, sharing=True), ledger(limits, sharing=True)
        both = (eager, told)
        live: dict[str, tuple[int, ...]] = {}
        shared_pages = SharedPages(told, live)
        serial = 0
        for _ in range(rng.randint(1, 60)):
            step = rng.randrange(4)
            free = [page for page in range(POOL) if page not in eager.holders]
            if step == 0 and free:  # admitted: a prefix of pages others hold (or kept), then fresh
                rid = f"r{serial}"
                serial += 1
                admit(both, rid)
                kept = rng.sample(range(POOL), rng.randint(0, 3))
                hit = tuple(page for page in kept if page not in free or rng.random() < 0.3)
                fresh = tuple(
                    page for page in rng.sample(free, min(len(free), 3)) if page not in hit
                )[: rng.randint(1, 3)]
                assert shared_pages.all_free(set(fresh)) == all(
                    page not in eager.holders for page in fresh
                ), trial
                shares = {rid: hit} if hit else {}
                scheduled, end = shared_pages.held_after(set(fresh), shares, {}, 0)
                if hit:
                    assert eager.grow(0, rid, hit, True, (rid,)) is None, trial
                    shared_pages.share(shares)
                eager.take_fresh(rid, fresh)
                live[rid] = hit + fresh
                shared_pages.take((rid,), fresh)
                assert scheduled == end == len(eager.holders), trial
            elif step == 1 and live:  # one finishes, giving back its whole table
                rid = rng.choice(list(live))
                given = live.pop(rid)
                held = shared_pages.held()
                _, end = shared_pages.held_after(set(), {}, {rid: given}, len(given))
                finish(both, rid)
                shared_pages.give_back(rid, given)
                assert eager.release(0, rid, given, "finished") is None
                eager.drop(0, rid, "finished")
                assert end == len(eager.holders) <= held, trial
            elif step == 2:
                shared_pages.tell()
                assert told.holders == eager.holders, trial
                assert tables(told) == tables(eager), trial
            assert shared_pages.held() == len(eager.holders), trial
        shared_pages.tell()
        assert (told.holders, tables(told)) == (eager.holders, tables(eager)), trial


def test_held_after_counts_a_whole_line_at_once() -> None:
    """``held_after`` over lines that admit several requests, some taking the same pages by
    reference, and finish several, some giving back the same shared page: the pages held are
    those of the tables before and after the line, call after call (what it counts in one call
    must not leak into the next, nor a page given back twice be freed twice)."""
    rng = random.Random(20261205)
    limits = Limits(batch_limit=8, page_size=4, pool_pages=POOL)
    for trial in range(300):
        told = ledger(limits, sharing=True)
        live: dict[str, tuple[int, ...]] = {}
        shared_pages = SharedPages(told, live)
        serial = 0
        for _ in range(rng.randint(1, 30)):
            held = {page for table in live.values() for page in table}
            leaving = rng.sample(sorted(live), rng.randint(0, min(3, len(live))))
            free = [page for page in range(POOL) if page not in held]
            rng.shuffle(free)
            shares: dict[str, tuple[int, ...]] = {}
            fresh: dict[str, tuple[int, ...]] = {}
            chosen: set[int] = set()
            for _ in range(rng.randint(0, 3)):
                rid = f"r{serial}"
                serial += 1
                admit((told,), rid)
                # A page taken by reference is held, or kept free; none is also fresh in the line.
                hit = tuple(rng.sample(range(POOL), rng.randint(0, 3)))
                hit = tuple(page for page in hit if page in held or rng.random() < 0.3)
                hit = tuple(page for page in hit if page not in chosen)
                mine = tuple(page for page in free[: rng.randint(0, 2)] if page not in hit)
                free = [page for page in free if page not in mine and page not in hit]
                chosen.update(mine)
                if hit:
                    shares[rid] = hit
                fresh[rid] = mine
            after = {rid: live[rid] for rid in live if rid not in leaving}
            after.update({rid: shares.get(rid, ()) + fresh[rid] for rid in fresh})
            frees = {rid: live[rid] for rid in leaving}
            scheduled, end = shared_pages.held_after(
                {page for pages in fresh.values() for page in pages},
                shares,
                frees,
                sum(len(pages) for pages in frees.values()),
            )
            taken = held | {page for pages in [*shares.values(), *fresh.values()] for page in pages}
            assert scheduled == len(taken), trial
            assert end == len({page for table in after.values() for page in table}), trial
            shared_pages.share(shares)
            for rid, mine in fresh.items():
                live[rid] = shares.get(rid, ()) + mine
                shared_pages.take((rid,), mine)
            for rid in leaving:
                given = live.pop(rid)
                finish((told,), rid)
                shared_pages.give_back(rid, given)
            assert shared_pages.held() == end, trial
            if rng.random() < 0.3:
                shared_pages.tell()


def test_a_line_allocating_nothing_is_lowered_again_as_it_was(tmp_path: Path) -> None:
    """An allocation of no pages, in a line taken fast: undoing it cuts nothing (a cut written
    ``table[:-len(pages)]`` would empty the table), and the lines before a finding a few lines
    on are lowered again as the full path lowered them."""
    rows = busy_rows(tmp_path)
    iterations = [row for row in rows if row.get("type") == "iteration"]
    line = iterations[len(iterations) // 2]
    first = next(op for op in line["ops"] if op[0] == "decode")[1][0]  # type: ignore[index]
    line["ops"].insert(0, ["alloc", first, []])  # type: ignore[union-attr]
    for later in range(1, 4):  # and a finding a few lines on
        broken = json.loads(json.dumps(rows))
        target = iterations.index(line) + later
        broken_line = [row for row in broken if row.get("type") == "iteration"][target]
        broken_line["free_pages"] += 1
        path = tmp_path / f"empty-alloc-{later}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in broken))
        assert_same(path)


def test_a_queue_naming_a_finished_request_after_fast_lines(tmp_path: Path) -> None:
    """The reader does not offer the fast path a line whose queue names a request that
    finished: the full path judges it, from the live tables as the lines taken in left them
    and with their events for the recent ones of a finding that follows."""
    rows = busy_rows(tmp_path)
    iterations = [row for row in rows if row.get("type") == "iteration"]
    done = next(op[1] for row in iterations for op in row["ops"] if op[0] == "finish")  # type: ignore[union-attr]
    later = iterations.index(
        next(
            row
            for row in iterations
            if [o for o in row["ops"] if o[0] == "finish" and o[1] == done]
        )
    )  # type: ignore[union-attr]
    for at in range(later + 5, later + 35, 3):
        broken = json.loads(json.dumps(rows))
        lines = [row for row in broken if row.get("type") == "iteration"]
        lines[at]["waiting"] = [done, *lines[at].get("waiting", [])]
        lines[at + 1]["free_pages"] += 1  # a finding just after, with the line among its recent
        path = tmp_path / f"finished-in-queue-{at}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in broken))
        assert check_stream(path).fast_lines > 0
        assert_same(path)
