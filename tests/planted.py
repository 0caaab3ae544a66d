"""Planting one violation into a clean event log (spec/eventlog.md), edited as decoded JSON lines.

Each planting picks, with the given random generator, one site of its kind in a log's lines,
changes what is there, and says which iteration it changed; it returns None when the log has no
such site. A planting edits nothing else: what a buggy engine or writer would log, one bug at a
time. tests/cover/test_planted_logs.py lists them by kind, each with the invariant ids its finding
may name; tests/planted_order.py holds those of frees, order and the queue, tests/planted_tokens.py
those of the tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from planted_ops import Line, Rows, schedule_end, walk

UNKNOWN = "zz-unknown"


@dataclass(frozen=True)
class Planted:
    iteration: int
    what: str
    later: str = ""
    """Why a finding may come after the planted iteration; empty: it must come in it."""


def pick(rng: random.Random, sites: list[Any]) -> Any:
    return rng.choice(sites) if sites else None


def _others(tables: dict[str, list[int]], rid: str) -> list[int]:
    """Pages some other request holds and ``rid`` does not."""
    own = set(tables.get(rid, ()))
    return sorted({p for other, t in tables.items() if other != rid for p in t} - own)


def steal(where: str, rows: Rows, rng: random.Random) -> Planted | None:
    """A table takes a page another request holds, nothing allocated or operated: ``grow``
    appends it, ``last`` puts it in place of the last page, ``middle`` in place of another. In
    version 1 the table is in ``page_tables``, of a request allocated nothing in that line; in
    version 2, where the operations build the tables, in a ``tables`` snapshot of the line."""
    sites = []
    for line in walk(rows):
        tables = line.scheduled()
        allocated = line.row["allocated"] if line.version == 1 else {}
        for rid, table in tables.items():
            if len(table) >= (2 if where == "middle" else 1) and not allocated.get(rid):
                sites += [(line, tables, rid, p) for p in _others(tables, rid)]
    site = pick(rng, sites)
    if site is None:
        return None
    line, tables, rid, page = site
    table = tables[rid]
    if where == "grow":
        table.append(page)
    else:
        table[-1 if where == "last" else rng.randrange(len(table) - 1)] = page
    if line.version == 1:
        line.row["page_tables"][rid] = table
    else:
        line.row["tables"] = tables
    return Planted(line.iteration, f"{rid}'s table takes page {page} ({where}): {table}")


def alloc_held(rows: Rows, rng: random.Random) -> Planted | None:
    """An allocation hands out a page another request holds (version 1: in ``allocated`` and
    ``page_tables`` alike), the free count as the allocator kept it."""
    sites = []
    for line in walk(rows):
        tables = line.scheduled()
        if line.version == 1:
            shared = line.row.get("shared", {})
            allocs = [
                (rid, pages, shared.get(rid, ())) for rid, pages in line.row["allocated"].items()
            ]
        else:
            allocs = [(op[1], op[2], ()) for op in line.ops if op[0] == "alloc"]
        for rid, pages, by_reference in allocs:
            fresh = [i for i, p in enumerate(pages) if p not in by_reference]
            sites += [(line, rid, pages, i, p) for i in fresh for p in _others(tables, rid)]
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, pages, i, page = site
    old, pages[i] = pages[i], page
    if line.version == 1:
        table = line.row["page_tables"][rid]
        table[table.index(old)] = page
    return Planted(line.iteration, f"{rid} is allocated page {page} (not {old}), held by another")


def unknown_id(rows: Rows, rng: random.Random) -> Planted | None:
    """A request id the workload does not declare arrives, or produces a token."""
    line = rng.choice(list(walk(rows)))
    row = line.row
    if rng.random() < 0.5:
        what = "arrives"
        if line.version == 1:
            row["arrived"].append(UNKNOWN)
        else:
            row["ops"].insert(0, ["arrive", UNKNOWN])
    else:
        what = "produces a token"
        if line.version == 1:
            row["decoded"].append(UNKNOWN)
        else:
            row["ops"].insert(schedule_end(row["ops"]), ["token", UNKNOWN])
    return Planted(line.iteration, f"unknown id {UNKNOWN!r} {what}")


def _admitted(line: Line) -> list[str]:
    if line.version == 1:
        return list(line.row["admitted"])
    return [op[1] for op in line.ops if op[0] == "admit"]


def readmit(rows: Rows, rng: random.Random) -> Planted | None:
    """A request admitted again while it runs, or twice in one iteration."""
    sites = [(line, rid, "while it runs") for line in walk(rows) for rid in line.running()]
    sites += [(line, rid, "in one iteration") for line in walk(rows) for rid in _admitted(line)]
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, how = site
    if line.version == 1:
        line.row["admitted"].append(rid)
    elif how == "in one iteration":
        at = line.ops.index(["admit", rid])
        line.ops.insert(at + 1, ["admit", rid])
    else:
        line.ops.insert(0, ["admit", rid])
    return Planted(line.iteration, f"{rid} admitted twice, {how}")


def rearrive(rows: Rows, rng: random.Random) -> Planted | None:
    """A running request arrives again: in ``arrived`` (version 1), an ``arrive`` op."""
    site = pick(rng, [(line, rid) for line in walk(rows) for rid in line.running()])
    if site is None:
        return None
    line, rid = site
    if line.version == 1:
        line.row["arrived"].append(rid)
    else:
        line.ops.insert(0, ["arrive", rid])
    return Planted(line.iteration, f"{rid} arrives again while it runs")


def repeated_in_batch(rows: Rows, rng: random.Random) -> Planted | None:
    """A running request listed twice in a version-1 line's ``active``."""
    site = pick(rng, [(line, rid) for line in walk(rows) for rid in line.running()])
    if site is None:
        return None
    line, rid = site
    line.row["active"].append(rid)
    return Planted(line.iteration, f"{rid} listed twice in the batch: {line.row['active']}")


def free_count(rows: Rows, rng: random.Random) -> Planted | None:
    """The free count one off, up or down."""
    line = rng.choice(list(walk(rows)))
    change = rng.choice((-1, 1))
    line.row["free_pages"] += change
    return Planted(line.iteration, f"free_pages {change:+d} (now {line.row['free_pages']})")


def _hits(line: Line) -> list[tuple[str, list[int]]]:
    """The line's prefix hits: each request that took pages by reference, and those pages (the
    list in the row, to edit)."""
    if line.version == 1:
        return list(line.row.get("shared", {}).items())
    return [(op[1], op[2]) for op in line.ops if op[0] == "share"]


def wrong_hit(rows: Rows, rng: random.Random) -> Planted | None:
    """A prefix hit takes a page that holds other content (another request's, held by it now)
    in place of one that holds the prefix: a stale hash, or a page evicted and reused. The
    tables and the free count follow the page taken, as the allocator would report them."""
    sites = []
    for line in walk(rows):
        tables = line.scheduled()
        for rid, pages in _hits(line):
            others = [p for p in _others(tables, rid) if p not in pages]
            sites += [(line, rid, pages, i, p) for i in range(len(pages)) for p in others]
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, pages, i, page = site
    old, pages[i] = pages[i], page
    if line.version == 1:
        for field in ("page_tables", "allocated"):
            table = line.row[field][rid]
            table[table.index(old)] = page
    held_before = any(old in t for other, t in line.scheduled().items() if other != rid)
    if not held_before:  # the page it should have taken was free: now one more stays free
        line.row["free_pages"] += 1
    return Planted(line.iteration, f"{rid}'s hit takes page {page} (not {old}), held by another")


def over_cached(rows: Rows, rng: random.Random) -> Planted | None:
    """A prefix hit claims more cached tokens than its shared pages hold, and computes that
    many fewer: its KV adds up, but part of it was never in the cache."""
    sites = []
    for line in walk(rows):
        computed = computed_by(line)
        for rid, pages in _hits(line):
            size = rows[0]["workload"]["limits"]["page_size"]
            cached = _cached(line).get(rid, 0)
            extra = len(pages) * size + 1 - cached
            if extra > 0 and computed.get(rid, 0) > extra:
                sites.append((line, rid, extra))
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, extra = site
    if line.version == 1:
        line.row["cached"][rid] = line.row["cached"].get(rid, 0) + extra
        line.row["computed"][rid] -= extra
    else:
        for op in line.ops:
            if op[0] == "cache" and op[1] == rid:
                op[2] += extra
            elif op[0] == "compute" and op[1] == rid:
                op[2] -= extra
    return Planted(line.iteration, f"{rid} takes {extra} tokens more from the cache than it holds")


def computed_by(line: Line) -> dict[str, int]:
    if line.version == 1:
        return dict(line.row.get("computed") or {})
    return {op[1]: op[2] for op in line.ops if op[0] == "compute"}


def _cached(line: Line) -> dict[str, int]:
    if line.version == 1:
        return dict(line.row.get("cached") or {})
    return {op[1]: op[2] for op in line.ops if op[0] == "cache"}
