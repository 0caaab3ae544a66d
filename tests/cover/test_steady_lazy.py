"""The fast path's lazy counting (checks/eventlog/steady_lazy.py) and its shortcuts, broken on
purpose: a request named at one page boundary and due again at the next, a late finish, a free of
a page not held. Each log holds a finding after lines the fast path took in, and both paths must
report it alike (tests/cover/test_steady.py compares them)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from test_steady import assert_same, write_v2

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.reference import ContinuousScheduler, run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload


def busy_rows(tmp_path: Path) -> list[Any]:
    """A clean log whose requests decode across several pages of 16 tokens."""
    rng = random.Random(7)
    made = tuple(
        Request(f"r{i}", i * 4, rng.randint(1, 40), rng.randint(20, 80)) for i in range(40)
    )
    workload = Workload("long-pages", Limits(batch_limit=4, page_size=16, pool_pages=40), made)
    recorded = run(workload, ContinuousScheduler, "continuous")
    path = write_v2(tmp_path / "clean.jsonl", recorded, TargetProperties(policy="continuous"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def broken_alike(tmp_path: Path, name: str, rows: list[Any]) -> None:
    """Both paths agree on ``rows``, which hold a finding after lines the fast path took."""
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    full = check_stream(path, fast=False)
    assert full.finding is not None
    assert check_stream(path).fast_lines > 0
    assert_same(path)


def test_a_page_boundary_after_a_named_one_is_still_due(tmp_path: Path) -> None:
    """A request named at one page boundary decodes on lazily; leaving out its page at a later
    boundary must still be found (a due noted from stale counts would let it pass)."""
    rows = busy_rows(tmp_path)
    seen: dict[str, int] = {}
    cases = 0
    for i, row in enumerate(rows):
        for op in row.get("ops", ()):
            if op[0] == "alloc" and len(op[2]) == 1 and i > 1:
                seen[op[1]] = seen.get(op[1], 0) + 1
                if seen[op[1]] == 2 and cases < 8:
                    broken = json.loads(json.dumps(rows))
                    broken[i]["ops"].remove(op)
                    broken[i]["free_pages"] += 1
                    broken_alike(tmp_path, f"boundary-{cases}.jsonl", broken)
                    cases += 1
    assert cases == 8


def test_a_late_finish_after_named_boundaries_is_found(tmp_path: Path) -> None:
    """A request finished (and its pages freed) one line after its last token: REQ-2, found alike
    however long it decoded lazily."""
    rows = busy_rows(tmp_path)
    cases = 0
    for i, row in enumerate(rows[:-1]):
        finishes = [op for op in row.get("ops", ()) if op[0] == "finish"]
        later = rows[i + 1]
        if not finishes or later.get("type") != "iteration" or cases >= 8:
            continue
        broken = json.loads(json.dumps(rows))
        rid = finishes[0][1]
        moved = [op for op in broken[i]["ops"] if op[1] == rid and op[0] in ("finish", "free")]
        for op in moved:
            broken[i]["ops"].remove(op)
            broken[i + 1]["ops"].append(op)
        freed = sum(len(op[2]) for op in moved if op[0] == "free")
        broken[i]["free_pages"] -= freed
        broken_alike(tmp_path, f"late-{cases}.jsonl", broken)
        cases += 1
    assert cases == 8


def test_a_finish_freeing_a_page_it_does_not_hold_is_found(tmp_path: Path) -> None:
    """The fast path lets a finished request's pages go without the ledger's per-page checks,
    only once they are shown to be its own: a page already free, freed again, is PAGE-3 alike."""
    rows = busy_rows(tmp_path)
    frees = [(i, op) for i, row in enumerate(rows) for op in row.get("ops", ()) if op[0] == "free"]
    for case, ((_, first), (i, then)) in enumerate(itertools.pairwise(frees[:9])):
        broken = json.loads(json.dumps(rows))
        op = next(x for x in broken[i]["ops"] if x == then)
        op[2][0] = first[2][0] if first[2][0] not in then[2] else first[2][-1]
        broken_alike(tmp_path, f"free-{case}.jsonl", broken)


def test_a_request_lazy_across_a_declined_line_falls_due_one_line_sooner(tmp_path: Path) -> None:
    """A clean line the fast path declines (here: one that repeats its tables as a snapshot)
    took one decode step of each lazy request, which stays lazy after it. Leaving out such a
    request's page at its next boundary must be found in that line, not one line later (a due
    kept as it was would let the boundary line pass)."""
    rows = busy_rows(tmp_path)
    lines = [row for row in rows if row.get("type") == "iteration"]
    tables: dict[str, tuple[int, ...]] = {}
    after: list[dict[str, tuple[int, ...]]] = []  # the live tables after each line
    for line in lines:
        for op in line["ops"]:
            if op[0] == "alloc":
                tables[op[1]] = tables.get(op[1], ()) + tuple(op[2])
            elif op[0] == "free":
                kept = tuple(p for p in tables.get(op[1], ()) if p not in op[2])
                tables.pop(op[1], None)
                if kept:
                    tables[op[1]] = kept
        after.append(dict(tables))

    def named(line: dict[str, Any]) -> set[str]:
        return {op[1] for op in line["ops"] if op[0] != "decode"}

    def decodes(line: dict[str, Any]) -> set[str]:
        return {rid for op in line["ops"] if op[0] == "decode" for rid in op[1]}

    cases = 0
    for at in range(4, len(lines) - 8):
        if cases == 5:
            break
        snapshot = lines[at]
        if named(snapshot) or any(named(lines[k]) for k in range(at - 3, at)):
            continue  # a line that only decodes, after lines that only decode
        lazy = set.intersection(*(decodes(lines[k]) for k in range(at - 3, at + 1)))
        for rid in sorted(lazy):
            boundary = next((k for k in range(at + 1, len(lines)) if rid in named(lines[k])), None)
            if boundary is None or boundary < at + 3:
                continue
            alloc = [op for op in lines[boundary]["ops"] if op[0] == "alloc" and op[1] == rid]
            if len(alloc) != 1 or len(alloc[0][2]) != 1:
                continue
            broken = json.loads(json.dumps(rows))
            line = [row for row in broken if row.get("type") == "iteration"]
            line[at]["tables"] = {r: list(t) for r, t in after[at].items()}
            line[boundary]["ops"].remove(alloc[0])
            line[boundary]["free_pages"] += 1
            path = tmp_path / f"declined-{cases}.jsonl"
            path.write_text("".join(json.dumps(row) + "\n" for row in broken))
            full = check_stream(path, fast=False)
            assert full.finding is not None
            assert full.finding.iteration == line[boundary]["iteration"], full.finding
            assert_same(path)
            cases += 1
            break
    assert cases == 5
