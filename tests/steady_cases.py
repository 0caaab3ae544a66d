"""The cases of tests/cover/test_steady_predicates.py: for each predicate a check declares beside
itself (checks/monitor/registry.py, ``Steady``), a small log that breaks the check on a line the
fast path would otherwise take in, or on a request such a line names, or in such a line's
allocations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.mutants.inflight import TURNOVER, ReusesInFlightPages
from kvsched.reference import ContinuousScheduler, run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload

Rows = list[dict[str, Any]]

WORKLOAD = Workload(
    "predicates",
    Limits(batch_limit=3, page_size=2, pool_pages=40),
    tuple(Request(f"r{i}", i // 2, 3 + i % 4, 4 + i % 5) for i in range(10)),
)


def clean_rows() -> Rows:
    recorded = run(WORKLOAD, ContinuousScheduler, "continuous")
    lines = v2_lines(recorded, TargetProperties(policy="continuous"))
    return [json.loads(line) for line in lines]


def iterations(rows: Rows) -> Rows:
    return [row for row in rows if row.get("type") == "iteration"]


def header_limits(rows: Rows, **changes: int) -> Rows:
    rows[0]["workload"]["limits"].update(changes)
    return rows


def free_count_off(rows: Rows) -> Rows:
    line = iterations(rows)[len(iterations(rows)) // 2]
    line["free_pages"] += 1
    return rows


def admissions_swapped(rows: Rows) -> Rows:
    for line in iterations(rows):
        admits = [i for i, op in enumerate(line["ops"]) if op[0] == "admit"]
        if len(admits) >= 2:
            a, b = admits[:2]
            ops = line["ops"]
            ops[a][1], ops[b][1] = ops[b][1], ops[a][1]
            return rows
    raise AssertionError("no line admits two requests")


def idle_first(rows: Rows) -> Rows:
    """An iteration in which nothing runs while the first requests wait, before the rest."""
    lines = iterations(rows)
    for line in lines:
        line["iteration"] += 1
    first = lines[0]
    at = rows.index(first)
    rows.insert(at, {"type": "iteration", "iteration": 1, "ops": [], "free_pages": 40})
    return rows


def queue_short(rows: Rows) -> Rows:
    """A reported queue of two or more that leaves its last request out."""
    for line in iterations(rows):
        if len(line.get("waiting", [])) >= 2:
            line["waiting"].pop()
            return rows
    raise AssertionError("no line reports a queue of two")


def queue_swapped(rows: Rows) -> Rows:
    """A reported queue whose head and tail arrived in different iterations, swapped (fcfs)."""
    arrival = {r["id"]: int(r["arrival"]) for r in rows[0]["workload"]["requests"]}
    for line in iterations(rows):
        queue = line.get("waiting", [])
        if len(queue) >= 2 and arrival[queue[0]] != arrival[queue[-1]]:
            queue[0], queue[-1] = queue[-1], queue[0]
            return rows
    raise AssertionError("no line reports a queue of two arrivals apart")


def unordered(rows: Rows) -> Rows:
    """The same log declaring no admission order."""
    rows[0]["target"]["order"] = "none"
    return rows


def budget_of(tokens: int, rows: Rows) -> Rows:
    """The same log declaring a token budget its batch of three decodes overruns (BATCH-1)."""
    rows[0]["target"]["token_budget"] = tokens
    return rows


def as_static(rows: Rows) -> Rows:
    """The same log declaring static batching, under which BATCH-3 (a continuous batcher's idle
    slot) does not apply: an idle batch is then LIVE-2's alone."""
    rows[0]["target"]["policy"] = "static"
    return rows


def undeclared_chunks() -> Rows:
    """A prompt computed in two chunks by a target that declares no chunked prefill: the chunk
    without a token spends an iteration of the lesson's bound, so the steady last line is past
    it (LIVE-1)."""
    prompt = Request("a", 0, 6, 2)
    ops: list[list[Any]] = [["admit", "a"], ["alloc", "a", [0]], ["compute", "a", 4]]
    lines = [
        {"type": "iteration", "iteration": 1, "ops": ops, "free_pages": 3},
        {"type": "iteration", "iteration": 2, "free_pages": 2, "ops": [
            ["alloc", "a", [1]], ["compute", "a", 2], ["token", "a"]]},
        {"type": "iteration", "iteration": 3, "free_pages": 4, "ops": [
            ["decode", ["a"]], ["finish", "a"], ["free", "a", [0, 1]]]},
    ]  # fmt: skip
    workload = Workload("chunks", Limits(batch_limit=1, page_size=4, pool_pages=4), (prompt,))
    empty = run(replace(workload, requests=()), ContinuousScheduler, "continuous")
    header = json.loads(next(iter(v2_lines(replace(empty, workload=workload), PLAIN))))
    return [header, *lines]


def chunks_undeclared_by_name() -> Rows:
    """The same two chunks where the target declares, by name, that it never chunks (BATCH-5):
    the first line's chunk is the finding."""
    rows = undeclared_chunks()
    rows[0]["target"]["chunking"] = "none"
    return rows


def by_priority(rows: Rows, first: str) -> Rows:
    """The same log declaring a priority order under which ``first`` comes before every other
    request: the queue a heap order serves, which only the full path keeps."""
    rows[0]["target"]["order"] = "priority"
    for request in rows[0]["workload"]["requests"]:
        if request["id"] == first:
            request["priority"] = -1
    return rows


def arriving_at(rows: Rows, rid: str, arrival: int) -> Rows:
    """The same log with ``rid`` arriving at ``arrival``, later than it did and before it is
    admitted: the queues reported before then leave it out."""
    for request in rows[0]["workload"]["requests"]:
        if request["id"] == rid:
            request["arrival"] = arrival
    for line in iterations(rows):
        if line["iteration"] <= arrival and rid in line.get("waiting", []):
            line["waiting"].remove(rid)
    return rows


def infeasible_last(rows: Rows) -> Rows:
    """The same log with one more request, no scheduler can hold, arriving after every other
    (the workload allows it): it waits at the head of the queue once the others are admitted,
    and is never rejected while the rest decode on steady lines (LIVE-5)."""
    workload = rows[0]["workload"]
    workload["allow_infeasible"] = True
    limits = workload["limits"]
    prompt = limits["pool_pages"] * limits["page_size"] + 1
    last = max(request["arrival"] for request in workload["requests"])
    workload["requests"].append(
        {"id": "huge", "arrival": last, "prompt_tokens": prompt, "output_tokens": 1}
    )
    for line in iterations(rows):
        if line["iteration"] > last:
            line["waiting"] = [*line.get("waiting", []), "huge"]
    return rows


PLAIN = TargetProperties(policy="continuous")

PREEMPTING = Workload(
    "preempting",
    Limits(batch_limit=4, page_size=2, pool_pages=14),
    tuple(Request(f"r{i}", 0, 4, 12) for i in range(3)),
)


def preempting_rows() -> Rows:
    """The engine scheduler as vLLM v1 is designed over a pool too small for three requests:
    r2 is preempted in iteration 6, r1 in iteration 10, each in a line that decodes the rest
    (pages 1 to 13 usable; r0 and r1 hold six each by iteration 9, page 5 free), and r0
    finishes in iteration 12."""
    config = replace(CONFIGS["vllm-v1"], token_budget=16)
    recorded = run(PREEMPTING, EngineScheduler.configured(config), properties=config.properties())
    rows = [json.loads(line) for line in v2_lines(recorded, config.properties())]
    tenth = next(row for row in rows if row.get("iteration") == 10)
    preempts = [["preempt", "r1"], ["free", "r1", [3, 4, 8, 11, 12, 6]], ["alloc", "r0", [5]]]
    assert tenth["ops"][:3] == preempts, tenth  # the pages the cases below name
    return rows


def up_to(rows: Rows, last: int, *lines: dict[str, Any]) -> Rows:
    """``rows`` up to iteration ``last``, then ``lines``: a log that stops there, undrained."""
    kept = [row for row in rows if row.get("type") != "iteration" or row["iteration"] <= last]
    return [*kept, *lines]


def preempted_for_nothing() -> Rows:
    """r0, alone in the batch with 6 pages free, preempted in iteration 11 in a line that
    computes nothing: it needed no room (LIVE-4)."""
    rows = preempting_rows()
    table = [1, 2, 7, 10, 13, 9, 5]  # r0's, once iteration 10 gave it page 5
    line = {"type": "iteration", "iteration": 11, "free_pages": 13, "waiting": ["r0", "r1", "r2"],
            "ops": [["preempt", "r0"], ["free", "r0", table]]}  # fmt: skip
    return up_to(rows, 10, line)


def preempted_again_without_progress() -> Rows:
    """r0 and r1 preempted in iteration 10 while r2, preempted in iteration 6, recomputes its
    prompt; r0 recomputes part of its own in iteration 11 (the pool too full for r1 then), and
    is preempted again in iteration 12 while r2 recomputes on, taking one of r0's pages: no
    token and no KV beyond the most any request held since r0's first preemption (LIVE-3), in
    a line that computes."""
    rows = preempting_rows()
    lines = [
        {"type": "iteration", "iteration": 10, "free_pages": 11, "waiting": ["r0", "r1"], "ops": [
            ["preempt", "r1"], ["free", "r1", [3, 4, 8, 11, 12, 6]],
            ["preempt", "r0"], ["free", "r0", [1, 2, 7, 10, 13, 9]],
            ["admit", "r2"], ["alloc", "r2", [5, 3]], ["compute", "r2", 4]]},
        {"type": "iteration", "iteration": 11, "free_pages": 6, "waiting": ["r1"], "ops": [
            ["admit", "r0"], ["alloc", "r0", [1, 2, 7, 10]], ["alloc", "r2", [4]],
            ["compute", "r0", 8], ["compute", "r2", 2]]},
        {"type": "iteration", "iteration": 12, "free_pages": 9, "waiting": ["r0", "r1"], "ops": [
            ["preempt", "r0"], ["free", "r0", [1, 2, 7, 10]], ["alloc", "r2", [7]],
            ["compute", "r2", 2]]},
    ]  # fmt: skip
    return up_to(rows, 9, *lines)


def at_iteration(rows: Rows, n: int) -> dict[str, Any]:
    return next(line for line in iterations(rows) if line["iteration"] == n)


def preemption_queue_swapped() -> Rows:
    """r1, preempted in iteration 10, reported behind r2, preempted in iteration 6: the latest
    preempted stands first (BATCH-4)."""
    rows = preempting_rows()
    line = at_iteration(rows, 10)
    assert line["waiting"] == ["r1", "r2"], line
    line["waiting"] = ["r2", "r1"]
    return rows


def preemption_queue_short() -> Rows:
    """r1, preempted in iteration 10, left out of the queue reported after it (REQ-2), under no
    declared order (so the queue's order has no say)."""
    rows = unordered(preempting_rows())
    at_iteration(rows, 10)["waiting"] = ["r2"]
    return rows


def preemption_free_count_off() -> Rows:
    """The free count of iteration 10, which preempts r1, one too high (PAGE-3)."""
    rows = preempting_rows()
    at_iteration(rows, 10)["free_pages"] += 1
    return rows


def reused_in_flight() -> Rows:
    """An asynchronous engine's log (checks/mutants/inflight.py) in which a finished request's
    page goes to a request admitted on the next line, a steady one (PAGE-7)."""
    properties = ReusesInFlightPages.properties
    recorded = run(TURNOVER, ReusesInFlightPages, properties.policy, properties=properties)
    return [json.loads(line) for line in v2_lines(recorded, properties)]


LINE_CASES: dict[str, Callable[[], Rows]] = {
    # The line that gives the page back is taken without PAGE-7's check recording it.
    "_gives_nothing_back": reused_in_flight,
    "_free_count_adds_up": lambda: free_count_off(clean_rows()),
    "_admits_in_order": lambda: admissions_swapped(clean_rows()),
    "_no_idle_slot": lambda: header_limits(clean_rows(), batch_limit=4),
    "_admits_within_the_limits": lambda: header_limits(clean_rows(), batch_limit=2),
    "_not_idle": lambda: as_static(idle_first(clean_rows())),
    "_within_the_bound": lambda: undeclared_chunks(),
    "_chunked_as_declared": lambda: chunks_undeclared_by_name(),
    # Under fcfs a short queue does not follow the last one either (_queue_follows).
    "_queue_adds_up": lambda: queue_short(unordered(clean_rows())),
    "_queue_follows": lambda: queue_swapped(clean_rows()),
    "_within_the_token_budget": lambda: budget_of(2, clean_rows()),
    "_none_infeasible": lambda: infeasible_last(clean_rows()),
    # r3 is admitted in iteration 5 while r5, first by priority, waits.
    "_admits_in_order/priority": lambda: by_priority(clean_rows(), "r5"),
    # A slot is idle in iteration 3, which admits no one, while r5, the head by priority, fits.
    "_no_idle_slot/priority": lambda: by_priority(
        arriving_at(header_limits(clean_rows(), batch_limit=4), "r3", 2), "r5"
    ),
    "_computes": preempted_for_nothing,
    "_progress_in_the_line": preempted_again_without_progress,
    # The same checks on a line that preempts, which the fast path takes in too.
    "_queue_follows/preempted": preemption_queue_swapped,
    "_queue_adds_up/preempted": preemption_queue_short,
    "_free_count_adds_up/preempted": preemption_free_count_off,
}
"""Each line predicate's case: a log that breaks its check on a line otherwise steady
(``name/variant``: a further case of one predicate, for another declaration it judges)."""


def _allocation_dropped(rows: Rows) -> Rows:
    """A page boundary a decoding request crosses with no page allocated (PAGE-1), the page
    given to it two lines later instead: its KV outgrows its table in between."""
    lines = iterations(rows)
    for at, line in enumerate(lines[3:-3], start=3):
        ops = line["ops"]
        decoding = next((op[1] for op in ops if op[0] == "decode"), [])
        allocs = [op for op in ops if op[0] == "alloc" and op[1] in decoding]
        if not allocs:
            continue
        rid, later = allocs[0][1], lines[at + 2]["ops"]
        finishes = any(op[0] == "finish" and op[1] == rid for op in lines[at + 1]["ops"])
        if not finishes and any(op[0] == "decode" and rid in op[1] for op in later):
            ops.remove(allocs[0])
            later.insert(0, allocs[0])
            for moved in lines[at : at + 2]:  # the page is free until it is given
                moved["free_pages"] += len(allocs[0][2])
            return rows
    raise AssertionError("no decoding request allocates mid-log")


def _finish_delayed(rows: Rows) -> Rows:
    """A request not finished at its last token (REQ-2): its finish and free come a line late."""
    lines = iterations(rows)
    for at, line in enumerate(lines[2:-2], start=2):
        ops = line["ops"]
        finish = next((op for op in ops if op[0] == "finish"), None)
        if finish is None:
            continue
        free = next(op for op in ops if op[0] == "free" and op[1] == finish[1])
        ops.remove(finish)
        ops.remove(free)
        lines[at + 1]["ops"] += [finish, free]
        line["free_pages"] -= len(free[2])  # its pages are held a line longer
        return rows
    raise AssertionError("no line finishes a request mid-log")


def _prompt_long(rows: Rows) -> Rows:
    """A prompt computed with a token more than exist (DEC-1): KV for a token not produced
    yet. Its KV ends inside a page, so that its pages cover the one token more minimally too
    (PAGE-1)."""
    page_size = rows[0]["workload"]["limits"]["page_size"]
    for line in iterations(rows)[2:]:
        for op in line["ops"]:
            if op[0] == "compute" and op[2] % page_size:
                op[2] += 1
                return rows
    raise AssertionError("no line computes a prompt that ends inside a page")


def _chunk_long() -> Rows:
    """A chunk short of a token that computes a token more than exist (DEC-1) where chunked
    prefill is declared: its pages cover it minimally, so only DEC-1 has work on it."""
    rows = undeclared_chunks()
    rows[0]["target"].update(chunked_prefill=True, token_budget=8)
    first, second = iterations(rows)[:2]
    first["ops"] = [["admit", "a"], ["alloc", "a", [0, 1]], ["compute", "a", 7]]
    first["free_pages"] = 2
    second["ops"] = [["compute", "a", 1], ["token", "a"]]
    return rows


REQUEST_CASES: dict[str, Callable[[], Rows]] = {
    "_covered_until_the_page_is_full": lambda: _allocation_dropped(clean_rows()),
    "_finished_at_its_last_token": lambda: _finish_delayed(clean_rows()),
    "_kv_reaches_the_token": lambda: _prompt_long(clean_rows()),
    "_kv_reaches_the_token/chunk": _chunk_long,
}
"""Each request predicate's case: a log that breaks its check on a request a steady line names
(``name/variant``: a further case of one predicate, for another of its branches)."""


def _stale_hit() -> Rows:
    """A prefix hit that takes a page another request wrote, and holds (PAGE-6), on a line the
    fast path takes in: the admission of a request of a group whose prefix is cached, in an
    engine run as vLLM v1 is designed."""
    workload = Workload(
        "hits",
        Limits(batch_limit=4, page_size=2, pool_pages=40),
        tuple(Request(f"r{i}", 2 * i, 6, 6, "sys", 4) for i in range(4)),
    )
    config = replace(CONFIGS["vllm-v1"], token_budget=64)
    properties = config.properties()
    factory = EngineScheduler.configured(config)
    recorded = run(workload, factory, properties.policy, properties=properties)
    rows = [json.loads(line) for line in v2_lines(recorded, properties)]
    tables: dict[str, list[int]] = {}
    for line in iterations(rows)[:-1]:
        shares = [op for op in line["ops"] if op[0] == "share"]
        if shares and len(tables) >= 2:
            taker, page = shares[0], shares[0][2][0]
            other = next(p for rid, t in tables.items() for p in t if p not in taker[2])
            taker[2][0] = other
            if not any(page in t for t in tables.values()):
                line["free_pages"] += 1  # the page it should have taken stays free
            return rows
        for op in line["ops"]:
            if op[0] in ("alloc", "share"):
                tables.setdefault(op[1], []).extend(op[2])
            elif op[0] == "free":
                tables.pop(op[1], None)
    raise AssertionError("no line admits a prefix hit while two requests hold pages")


ALLOCATION_CASES: dict[str, Callable[[], Rows]] = {
    "_hits_read_their_prefix": _stale_hit,
    # The steady line that takes the page back is taken without PAGE-7's check.
    "_not_just_given_back": reused_in_flight,
}
"""Each allocations predicate's case: a log that breaks its check on a steady line's
allocations."""


def _freed(rows: Rows, change: Callable[[list[int]], int]) -> Rows:
    """The first finish mid-log with its free changed by ``change``, which returns the pages
    the free now gives back beyond the table (negative: fewer); the free count says so."""
    for line in iterations(rows)[2:-2]:
        free = next((op for op in line["ops"] if op[0] == "free"), None)
        if free is not None:
            line["free_pages"] += change(free[2])
            return rows
    raise AssertionError("no line frees a finished request's table mid-log")


def _twice(pages: list[int]) -> int:
    pages.append(pages[-1])
    return 1


def _kept(pages: list[int]) -> int:
    pages.pop()
    return -1


FREES_CASES: dict[str, Callable[[], Rows]] = {
    # A double free (PAGE-3), counted free twice by the target.
    "_frees_only_what_it_holds": lambda: _freed(clean_rows(), _twice),
    # A finished request that keeps its last page (PAGE-4), counted as held by the target.
    "_frees_all_it_holds": lambda: _freed(clean_rows(), _kept),
}
"""Each frees predicate's case: a log whose finished request gives back other than its table,
on a line otherwise steady."""
