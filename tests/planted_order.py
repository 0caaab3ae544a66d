"""The plantings of tests/planted.py that release pages and order requests: frees, admissions
in order, operations in their phase, and the waiting queue (spec/eventlog.md, 4.6 and 8.2)."""

from __future__ import annotations

import random
from itertools import combinations, pairwise
from typing import Any

from planted import Planted, pick
from planted_ops import SCHEDULE, STEP, Rows, admission_blocks, schedule_end, walk


def _frees(line: Any) -> list[tuple[str, list[int]]]:
    """Each request's list of pages freed in the line (version 2: each ``free`` op's)."""
    if line.version == 1:
        return [(rid, pages) for rid, pages in line.row["freed"].items() if pages]
    return [(op[1], op[2]) for op in line.ops if op[0] == "free" and op[2]]


def free_twice(rows: Rows, rng: random.Random) -> Planted | None:
    """A page freed twice in one iteration: listed again in the request's frees (version 1), or
    freed by a second ``free`` op right after the first (version 2); the free count takes it
    back once, or twice."""
    site = pick(rng, [(line, rid, pages) for line in walk(rows) for rid, pages in _frees(line)])
    if site is None:
        return None
    line, rid, pages = site
    page = rng.choice(pages)
    if line.version == 1:
        pages.append(page)
    else:
        at = next(i for i, op in enumerate(line.ops) if op[0] == "free" and op[2] is pages)
        line.ops.insert(at + 1, ["free", rid, [page]])
    line.row["free_pages"] += rng.choice((0, 1))
    return Planted(line.iteration, f"{rid} frees page {page} twice")


def free_unheld(rows: Rows, rng: random.Random) -> Planted | None:
    """A request that frees pages frees one more it does not hold (another request's, a free
    one, or a reserved one); the free count takes it back."""
    pool = int(rows[0]["workload"]["limits"]["pool_pages"])
    sites = []
    for line in walk(rows):
        tables = line.scheduled()
        for rid, pages in _frees(line):
            held = {*line.before.get(rid, ()), *tables.get(rid, ()), *pages}
            sites += [(line, rid, pages, p) for p in range(pool) if p not in held]
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, pages, page = site
    pages.append(page)
    line.row["free_pages"] += 1
    return Planted(line.iteration, f"{rid} frees page {page}, which it does not hold")


def keep_pages(rows: Rows, rng: random.Random) -> Planted | None:
    """A finished request's pages are never freed; the free count is what it would then be."""
    sites = []
    for line in walk(rows):
        finished = (
            line.row["finished"]
            if line.version == 1
            else [op[1] for op in line.ops if op[0] == "finish"]
        )
        update = schedule_end(line.ops) if line.version == 2 else 0
        for rid in finished:
            if line.version == 1 and line.row["freed"].get(rid):
                sites.append((line, rid, [line.row["freed"][rid]]))
            elif line.version == 2:
                ops = [op for op in line.ops[update:] if op[0] == "free" and op[1] == rid]
                if any(op[2] for op in ops):
                    sites.append((line, rid, ops))
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid, kept = site
    others = {p for other, table in line.after().items() if other != rid for p in table}
    if line.version == 1:
        pages = line.row["freed"].pop(rid)
    else:
        pages = [p for op in kept for p in op[2]]
        line.row["ops"] = [op for op in line.ops if all(op is not k for k in kept)]
    line.row["free_pages"] -= len(set(pages) - others)
    return Planted(line.iteration, f"{rid} finishes and keeps pages {sorted(pages)}")


def fcfs(rows: Rows) -> bool:
    """Whether the log declares first-come first-served admission (its policy's default)."""
    target = rows[0]["target"]
    lesson = target["policy"] in ("static", "continuous")
    return bool(target.get("order", "fcfs" if lesson else "none") == "fcfs")


def swap_admissions(rows: Rows, rng: random.Random) -> Planted | None:
    """Two requests admitted in one iteration, under a fcfs declaration, in the other order:
    in ``admitted`` and ``active`` (version 1), or their ``admit`` ops each with its pages."""
    if not fcfs(rows):
        return None
    sites = []
    for line in walk(rows):
        if line.version == 1:
            admitted = line.row["admitted"]
            sites += [(line, i) for i in range(len(admitted) - 1)]
        else:
            own = [
                (s, e)
                for s, e in admission_blocks(line.ops)
                if all(op[1] == line.ops[s][1] for op in line.ops[s:e])
            ]
            sites += [(line, a, b) for a, b in pairwise(own) if a[1] == b[0]]
    site = pick(rng, sites)
    if site is None:
        return None
    line = site[0]
    if line.version == 1:
        admitted, active, i = line.row["admitted"], line.row["active"], site[1]
        first, second = admitted[i], admitted[i + 1]
        admitted[i], admitted[i + 1] = second, first
        x, y = active.index(first), active.index(second)
        active[x], active[y] = second, first
    else:
        (s, m), (_, e) = site[1], site[2]
        first, second = line.ops[s][1], line.ops[m][1]
        line.ops[s:e] = line.ops[m:e] + line.ops[s:m]
    return Planted(line.iteration, f"{second} admitted before {first}")


def out_of_phase(rows: Rows, rng: random.Random) -> Planted | None:
    """A version-2 operation moved out of its phase: a schedule op after the step's first op,
    or a step op after a finish (malformed: schedule, step, update, in that order)."""
    sites = []
    for line in walk(rows):
        end, ops = schedule_end(line.ops), line.ops
        if end < len(ops) and ops[end][0] in STEP:
            sites += [(line, i, end) for i in range(end) if ops[i][0] in SCHEDULE]
        for f in (i for i, op in enumerate(ops) if op[0] == "finish"):
            sites += [(line, i, f) for i in range(end, f) if ops[i][0] in STEP]
    site = pick(rng, sites)
    if site is None:
        return None
    line, i, after = site
    op = line.ops.pop(i)
    line.ops.insert(after, op)
    return Planted(line.iteration, f"{op[:2]} moved after {line.ops[after - 1][:2]}")


def reorder_queue(rows: Rows, rng: random.Random) -> Planted | None:
    """Two requests of the waiting queue swapped, under a fcfs declaration: two never preempted
    that arrived in different iterations (requests that joined the queue in one iteration may
    stand in any order, 4.6)."""
    if not fcfs(rows):
        return None
    # A request arrives in the first iteration past its arrival time, or by an 'arrive'.
    arrived = {r["id"]: int(r["arrival"]) + 1 for r in rows[0]["workload"]["requests"]}
    preempted: set[str] = set()
    sites = []
    for line in walk(rows):
        ops = line.ops if line.version == 2 else []
        arrived.update({op[1]: line.iteration for op in ops if op[0] == "arrive"})
        preempted.update(op[1] for op in ops if op[0] == "preempt")
        preempted.update(line.row.get("preempted", ()))
        queue = line.row.get("waiting", ())
        sites += [
            (line, i, j)
            for i, j in combinations(range(len(queue)), 2)
            if queue[i] not in preempted
            and queue[j] not in preempted
            and arrived[queue[i]] != arrived[queue[j]]
        ]
    site = pick(rng, sites)
    if site is None:
        return None
    line, i, j = site
    queue = line.row["waiting"]
    queue[i], queue[j] = queue[j], queue[i]
    return Planted(line.iteration, f"waiting {queue[j]} and {queue[i]} swapped: {queue}")


def drop_from_queue(rows: Rows, rng: random.Random) -> Planted | None:
    """A request left out of the waiting queue (an emptied queue written as ``[]``)."""
    line = pick(rng, [line for line in walk(rows) if line.row.get("waiting")])
    if line is None:
        return None
    queue = line.row["waiting"]
    gone = queue.pop(rng.randrange(len(queue)))
    return Planted(line.iteration, f"{gone} dropped from the waiting queue: {queue}")


def substitute_in_queue(rows: Rows, rng: random.Random) -> Planted | None:
    """A request of the waiting queue listed twice, in place of another, which is left out: the
    queue's size still adds up."""
    line = pick(rng, [line for line in walk(rows) if len(line.row.get("waiting") or ()) > 1])
    if line is None:
        return None
    queue = line.row["waiting"]
    gone, twice = rng.sample(range(len(queue)), 2)
    left_out, queue[gone] = queue[gone], queue[twice]
    return Planted(line.iteration, f"{left_out} replaced by a second {queue[gone]}: {queue}")
