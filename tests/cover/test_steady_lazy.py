"""The fast path's lazy counting (checks/eventlog/steady_lazy.py) and its shortcuts, broken on
purpose: a request named at one page boundary and due again at the next, a late finish, a free of
a page not held. Each log holds a finding after lines the fast path took in, and both paths must
report it alike (tests/cover/test_steady.py compares them)."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_steady import assert_same, outcome, write_v2

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.reference import ContinuousScheduler, run
from kvsched.reference.engine_scheduler import EngineScheduler
from kvsched.reference.engine_scheduler.config import VLLM_V1
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


def written(path: Path, rows: list[Any]) -> Path:
    """``rows`` as a log at ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def broken_alike(tmp_path: Path, name: str, rows: list[Any]) -> None:
    """Both paths agree on ``rows``, which hold a finding after lines the fast path took."""
    path = written(tmp_path / name, rows)
    full = check_stream(path, fast=False)
    assert full.finding is not None
    assert check_stream(path).fast_lines > 0
    assert_same(path)


def caught_alike(path: Path) -> None:
    """The full path finds a violation in ``path`` (or refuses it as invalid), and both paths
    agree."""
    full = outcome(path, fast=False, every=False)
    assert isinstance(full, str) or full.finding is not None, path.name
    assert_same(path)


def caught_at(path: Path, line: dict[str, Any]) -> None:
    """The full path finds a violation in ``path`` in the iteration of ``line``, and both paths
    agree."""
    full = check_stream(path, fast=False)
    assert full.finding is not None
    assert full.finding.iteration == line["iteration"], full.finding
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
            caught_at(written(tmp_path / f"declined-{cases}.jsonl", broken), line[boundary])
            cases += 1
            break
    assert cases == 5


def preempting_rows(tmp_path: Path) -> list[Any]:
    """A clean log of the engine scheduler as vLLM v1 is designed (a token budget, chunked
    prefill, prefix hits), 16 slots over a pool that makes it preempt now and then: lines the
    fast path declines between runs of lines it takes, with requests lazy across them."""
    made = tuple(
        Request(f"r{n}", n // 2, 16 + (n * 53) % 120, 20 + (n * 37) % 90, f"g{n % 2}", 16)
        for n in range(60)
    )
    workload = Workload("preempting", Limits(batch_limit=16, page_size=8, pool_pages=90), made)
    config = replace(VLLM_V1, token_budget=96)
    recorded = run(workload, EngineScheduler.configured(config), properties=config.properties())
    path = write_v2(tmp_path / "preempting.jsonl", recorded, config.properties())
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_preempting_log_is_clean_alike_and_mostly_taken(tmp_path: Path) -> None:
    rows = preempting_rows(tmp_path)
    preempting = [row for row in rows if any(op[0] == "preempt" for op in row.get("ops", ()))]
    assert len(preempting) >= 5  # the comparison is about lines around preemptions
    path = written(tmp_path / "clean.jsonl", rows)
    assert check_stream(path, fast=False).finding is None
    assert assert_same(path) > len(rows)  # over both runs: most lines taken in fast


def _planted_near(line: dict[str, Any], victim: str, choice: int) -> bool:
    """One violation in ``line``, a preemption's line or one soon after it: a page left out, a
    token twice, a request left out of the decode, or the preempted ``victim`` decoding without
    being admitted again. Whether it took."""
    ops = line["ops"]
    decodes = [op for op in ops if op[0] == "decode" and op[1]]
    allocs = [op for op in ops if op[0] == "alloc" and len(op[2]) == 1]
    if choice == 0 and allocs:
        ops.remove(allocs[-1])
        line["free_pages"] += 1
    elif choice == 1 and decodes:
        decodes[0][1].append(decodes[0][1][0])
    elif choice == 2 and decodes and len(decodes[0][1]) > 1:
        del decodes[0][1][-1]
    elif choice == 3 and decodes and victim not in decodes[0][1]:
        decodes[0][1].append(victim)
    else:
        return False
    return True


def test_findings_around_preemptions_agree(tmp_path: Path) -> None:
    """Planted in a preemption's line or in one of the next three (where the requests the fast
    path kept lazy across the declined line are counted on, and its victim waits), each
    violation is found, alike on both paths: a lazy request preempted, a finding right after a
    preemption, preemptions between steady lines."""
    rows = preempting_rows(tmp_path)
    sites = [
        (i, next(op[1] for op in row["ops"] if op[0] == "preempt"))
        for i, row in enumerate(rows)
        if any(op[0] == "preempt" for op in row.get("ops", ()))
    ]
    cases = 0
    for i, victim in sites[:4]:
        for after in (0, 1, 3):
            if i + after >= len(rows) or rows[i + after].get("type") != "iteration":
                continue
            for choice in range(4):
                broken = json.loads(json.dumps(rows))
                if not _planted_near(broken[i + after], victim, choice):
                    continue
                caught_alike(written(tmp_path / f"near-{i}-{after}-{choice}.jsonl", broken))
                cases += 1
    assert cases >= 30


def test_page_boundaries_after_a_preemption_are_still_due(tmp_path: Path) -> None:
    """The requests that only decode in a preemption's line (declined) stay lazy across it,
    keeping their dues. Leaving out such a request's page at its next boundary, one to six
    lines after the preemption (due by the next line: it joins again; later: its due kept),
    must be found in that boundary's line, alike on both paths."""
    rows = preempting_rows(tmp_path)
    lines = [i for i, row in enumerate(rows) if row.get("type") == "iteration"]
    cases: dict[int, int] = {}
    for place, i in enumerate(lines):
        ops = rows[i]["ops"]
        if not any(op[0] == "preempt" for op in ops):
            continue
        touched = {op[1] for op in ops if op[0] != "decode"}
        decoding = [rid for op in ops if op[0] == "decode" for rid in op[1]]
        for rid in sorted(set(decoding) - touched):
            later = lines[place + 1 : place + 7]
            boundary = next(
                (
                    k
                    for k in later
                    if any(op[1] == rid for op in rows[k]["ops"] if op[0] != "decode")
                ),
                None,
            )
            if boundary is None:
                continue
            alloc = [op for op in rows[boundary]["ops"] if op[0] == "alloc" and op[1] == rid]
            distance = lines.index(boundary) - place
            if len(alloc) != 1 or len(alloc[0][2]) != 1 or cases.get(distance, 0) >= 3:
                continue
            broken = json.loads(json.dumps(rows))
            broken[boundary]["ops"].remove(alloc[0])
            broken[boundary]["free_pages"] += 1
            path = written(tmp_path / f"after-preemption-{i}-{rid}.jsonl", broken)
            caught_at(path, rows[boundary])
            cases[distance] = cases.get(distance, 0) + 1
    assert sum(cases.values()) >= 10, cases
    assert len(cases) >= 3, cases  # due by the next line, and later


def test_a_lazy_request_stepping_wrongly_in_a_preemption_line_is_found(tmp_path: Path) -> None:
    """A request that was lazy before a preemption's line and decodes twice there, or is left
    out of its decode, is judged by the full path there; the next lines, where the requests kept
    lazy across it decode on, must agree too."""
    rows = preempting_rows(tmp_path)
    cases = 0
    for i, row in enumerate(rows):
        ops = row.get("ops", ())
        if not any(op[0] == "preempt" for op in ops) or cases >= 12:
            continue
        touched = {op[1] for op in ops if op[0] != "decode"}
        decodes = [op for op in ops if op[0] == "decode"]
        if not decodes:
            continue
        quiet = [rid for rid in decodes[0][1] if rid not in touched]
        if len(quiet) < 2:
            continue
        for twice in (True, False):
            broken = json.loads(json.dumps(rows))
            listed = next(op for op in broken[i]["ops"] if op[0] == "decode")[1]
            if twice:
                listed.append(quiet[-1])
            else:
                listed.remove(quiet[-1])
            caught_alike(written(tmp_path / f"stepping-{i}-{twice}.jsonl", broken))
            cases += 1
    assert cases >= 8


def _plant_at_preemption(line: dict[str, Any], victim: str, held: list[int], choice: int) -> bool:
    """One violation in a preemption's ``line``: the victim keeps a page it should give back,
    gives back one it does not hold (``held``: another running request's pages), decodes as it
    is preempted, or a request finishing in the same line keeps a page. Whether it took."""
    ops = line["ops"]
    frees = [op for op in ops if op[0] == "free" and op[1] == victim and op[2]]
    ending = [op for op in ops if op[0] == "free" and op[1] != victim and op[2]]
    decodes = [op for op in ops if op[0] == "decode"]
    if choice == 0 and frees:
        frees[0][2].pop()
        line["free_pages"] -= 1
    elif choice == 1 and frees and held:
        frees[0][2].append(held[0])
        line["free_pages"] += 1
    elif choice == 2 and decodes and victim not in decodes[0][1]:
        decodes[0][1].append(victim)
    elif choice == 3 and ending:
        ending[0][2].pop()
        line["free_pages"] -= 1
    else:
        return False
    return True


def test_findings_on_preemption_lines_agree(tmp_path: Path) -> None:
    """Bugs planted on the lines that preempt, by kind of victim: one lazy until then (it
    only decoded in the lines before), one whose table began with prefix pages it shares, one
    preempted a second time, and lines that also finish a request. The full path judges those
    lines, with the lazy set brought in and kept across them; both paths must agree."""
    rows = preempting_rows(tmp_path)
    tables: dict[str, list[int]] = {}
    shared: set[str] = set()
    preempted: set[str] = set()
    kinds: dict[str, int] = {}
    for i, row in enumerate(rows):
        ops = row.get("ops", ())
        victims = [op[1] for op in ops if op[0] == "preempt"]
        if victims and i >= 3:
            victim = victims[0]
            before = rows[i - 3 : i]
            lazy = all(
                victim in [r for op in b.get("ops", ()) if op[0] == "decode" for r in op[1]]
                and not any(op[1] == victim for op in b.get("ops", ()) if op[0] != "decode")
                for b in before
            )
            found = {
                "lazy": lazy,
                "shared": victim in shared,
                "twice": victim in preempted,
                "finishing": any(op[0] == "finish" for op in ops),
            }
            wanted = [kind for kind, yes in found.items() if yes and kinds.get(kind, 0) < 3]
            others = [p for rid, pages in tables.items() if rid not in victims for p in pages]
            for choice in range(4) if wanted else ():
                broken = json.loads(json.dumps(rows))
                if not _plant_at_preemption(broken[i], victim, others, choice):
                    continue
                caught_alike(written(tmp_path / f"preempting-{i}-{choice}.jsonl", broken))
            for kind in wanted:
                kinds[kind] = kinds.get(kind, 0) + 1
        for op in ops:
            if op[0] in ("alloc", "share"):
                tables.setdefault(op[1], []).extend(op[2])
                if op[0] == "share":
                    shared.add(op[1])
            elif op[0] == "free":
                tables.pop(op[1], None)
            elif op[0] == "preempt":
                preempted.add(op[1])
    assert kinds == {"lazy": 3, "shared": 3, "twice": 3, "finishing": 3}, kinds
