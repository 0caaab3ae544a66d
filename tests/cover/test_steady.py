"""The event-log checker's fast path (checks/eventlog/steady.py) against its full path.

Both paths run over the same logs, with and without ``--all-findings``: clean logs of the
reference policies and of the engine targets, the recorded logs of tests/logs, the zoo's mutants
and hundreds of logs broken at random, line by line, in small batches and in batches of 64 to 256
(600 of those under ``-m slow``). They must agree on everything a check
reports: the findings with their iterations, texts and recent events, the later findings, the
efficiency figures and the iterations read, or raise the same error for a malformed log.
"""

from __future__ import annotations

import importlib
import json
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from engines.recorded_logs import SCENARIOS

from kvsched.checks.eventlog.jsonl import EventLogError, read_run
from kvsched.checks.eventlog.log_check import LogCheck, check_stream
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.mutants.zoo import ZOO
from kvsched.reference import ContinuousScheduler, StaticScheduler, run
from kvsched.reference.engine import Run
from kvsched.reference.families import generate
from kvsched.spec.properties import TargetProperties
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload

LOGS = Path(__file__).resolve().parents[1] / "logs"


def outcome(path: Path, fast: bool, every: bool) -> LogCheck | str:
    try:
        checked = check_stream(path, all_findings=every, fast=fast)
    except EventLogError as error:
        return f"invalid: {error}"
    return checked


def assert_same(path: Path) -> int:
    """Both paths agree on ``path``, with and without all findings; the lines taken in fast."""
    taken = 0
    for every in (False, True):
        full, fast = outcome(path, False, every), outcome(path, True, every)
        if isinstance(full, LogCheck) and isinstance(fast, LogCheck):
            assert full.fast_lines == 0
            taken += fast.fast_lines
            fast = replace(fast, fast_lines=0)  # the rest, excuses included, must agree
        assert fast == full, path.read_text()[:2000]
    return taken


def write_v2(path: Path, recorded: Run, properties: TargetProperties) -> Path:
    path.write_text("".join(line + "\n" for line in v2_lines(recorded, properties)))
    return path


def busy(requests: int, seed: int) -> Workload:
    """About ``requests`` requests keeping a small batch full, pages of 4 tokens."""
    rng = random.Random(seed)
    limits = Limits(batch_limit=rng.randint(2, 8), page_size=rng.choice((1, 2, 4)), pool_pages=0)
    made = tuple(
        Request(f"r{i}", i // 2 + rng.randint(0, 3), rng.randint(1, 20), rng.randint(1, 30))
        for i in range(requests)
    )
    most = max(-(-(r.prompt_tokens + r.output_tokens) // limits.page_size) for r in made)
    pool = most * limits.batch_limit + rng.choice((0, -most, 3))
    limits = Limits(limits.batch_limit, limits.page_size, max(pool, most + 1))
    return Workload(f"busy-{seed}", limits, made)


def reference_logs(tmp_path: Path) -> list[Path]:
    workloads = [load_teaching_trace(), generate("poisson-long-roomy", 60, 1)]
    workloads += [busy(30, seed) for seed in range(12)]
    paths = []
    for i, workload in enumerate(workloads):
        for policy, scheduler in (("continuous", ContinuousScheduler), ("static", StaticScheduler)):
            recorded = run(workload, scheduler, policy)
            properties = TargetProperties(policy=policy)
            paths.append(write_v2(tmp_path / f"{policy}-{i}.jsonl", recorded, properties))
    return paths


def test_clean_reference_logs_agree_and_are_mostly_taken_fast(tmp_path: Path) -> None:
    taken = lines = 0
    for path in reference_logs(tmp_path):
        assert check_stream(path, fast=False).finding is None  # static batches included
        taken += assert_same(path)
        lines += 2 * (len(path.read_text().splitlines()) - 1)
    assert taken > lines // 2  # the comparison is not vacuous: the fast path does the work


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_recorded_engine_logs_agree(scenario: Any, tmp_path: Path) -> None:
    recorded, properties = read_run(scenario.path)
    assert_same(write_v2(tmp_path / "v2.jsonl", recorded, properties))
    # the same engine declaring nothing but its policy is in the fast path's scope
    plain = TargetProperties(policy=properties.policy)
    assert_same(write_v2(tmp_path / "plain.jsonl", recorded, plain))


def zoo_schedulers() -> list[tuple[str, Callable[..., Any]]]:
    found = []
    for mutant in ZOO:
        module, _, name = mutant.target.partition(":")
        # hostile schedulers raise or hang, which only a hosted target may do
        hostile = "hostile" in module or "hang" in mutant.name
        if module.startswith("kvsched.checks.mutants.") and not hostile:
            found.append((mutant.name, getattr(importlib.import_module(module), name)))
    return found


@pytest.mark.parametrize("name, scheduler", zoo_schedulers(), ids=lambda x: str(x)[:40])
def test_mutant_schedulers_agree(name: str, scheduler: Any, tmp_path: Path) -> None:
    for i, workload in enumerate((load_teaching_trace(), busy(24, 5), busy(40, 7))):
        policy = getattr(scheduler, "policy", "") or "continuous"
        recorded = run(workload, scheduler, policy)
        properties = TargetProperties(policy=policy)
        assert_same(write_v2(tmp_path / f"{i}.jsonl", recorded, properties))


@pytest.mark.parametrize("buggy", [True, False])
def test_mutant_logs_agree(buggy: bool, tmp_path: Path) -> None:
    for i, mutant in enumerate(m for m in ZOO if m.write is not None):
        folder = tmp_path / str(i)
        folder.mkdir()
        written = mutant.write(folder, buggy) if "buggy" in _parameters(mutant.write) else None
        if written is None or not written.name.endswith(".jsonl"):
            continue
        recorded, properties = read_run(written)
        assert_same(write_v2(folder / "v2.jsonl", recorded, properties))
        assert_same(
            write_v2(folder / "plain.jsonl", recorded, TargetProperties(policy="continuous"))
        )


def _parameters(function: Callable[..., Any]) -> tuple[str, ...]:
    return function.__code__.co_varnames[: function.__code__.co_argcount]


def mutate(rows: list[Any], rng: random.Random, row: Any = None) -> None:
    """One random change to one iteration line (``row``, else one drawn): what a buggy engine
    or writer might log."""
    lines = [row for row in rows if row.get("type") == "iteration"]
    row = rng.choice(lines) if row is None else row
    ops = row["ops"]
    choice = rng.randrange(10)
    if choice == 0 and ops:
        del ops[rng.randrange(len(ops))]
    elif choice == 1:
        row["free_pages"] += rng.choice((-1, 1))
    elif choice in (2, 3):
        decodes = [op for op in ops if op[0] == "decode" and op[1]]
        if decodes:
            listed = rng.choice(decodes)[1]
            if choice == 2:
                del listed[rng.randrange(len(listed))]
            else:
                listed.append(rng.choice(listed))
    elif choice == 4:
        allocs = [op for op in ops if op[0] == "alloc" and op[2]]
        if allocs:
            op = rng.choice(allocs)
            op[2][rng.randrange(len(op[2]))] = rng.randrange(-1, 40)
    elif choice == 5 and ops:
        ops.insert(rng.randrange(len(ops) + 1), rng.choice(rng.choice(lines)["ops"] or [ops[0]]))
    elif choice == 6 and len(ops) > 1:
        i = rng.randrange(len(ops) - 1)
        ops[i], ops[i + 1] = ops[i + 1], ops[i]
    elif choice == 7:
        later = rng.choice(lines)
        moved = [op for op in ops if op[0] in ("finish", "free", "admit")]
        if moved:
            op = rng.choice(moved)
            ops.remove(op)
            later["ops"].append(op)
    elif choice == 8:
        # an alloc, or a finish with its frees, left out with the free count kept consistent
        gone = [op for op in ops if op[0] in ("alloc", "finish")]
        if gone:
            op = rng.choice(gone)
            with_it = [
                x for x in ops if x is op or (op[0] == "finish" and x[:2] == ["free", op[1]])
            ]
            for x in with_it:
                ops.remove(x)
                if x[0] in ("alloc", "free"):
                    row["free_pages"] += len(x[2]) * (1 if x[0] == "alloc" else -1)
    else:
        row["waiting"] = list(reversed(row.get("waiting", []))) or ["r0"]


def test_randomly_broken_logs_agree(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    clean = reference_logs(tmp_path)
    for trial in range(250):
        rows = [json.loads(line) for line in rng.choice(clean).read_text().splitlines()]
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutate(rows, rng)
        path = tmp_path / f"broken-{trial}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        assert_same(path)


def test_busy_shape_is_taken_fast_end_to_end(tmp_path: Path) -> None:
    recorded = run(busy(200, 99), ContinuousScheduler, "continuous")
    path = write_v2(tmp_path / "busy.jsonl", recorded, TargetProperties(policy="continuous"))
    checked = check_stream(path)
    assert checked.finding is None
    assert checked.fast_lines > checked.iterations * 3 // 4


def test_decode_lists_changed_otherwise_than_by_who_left_agree(tmp_path: Path) -> None:
    """The fast path reads a changed decode list as the last one less the requests the line
    before finished, then new ids (checks/eventlog/ids.py, ``DecodeList``). A list that keeps
    a finished request, lists it in another's place, or reorders those kept is judged as the
    full path judges it."""
    recorded = run(busy(120, 7), ContinuousScheduler, "continuous")
    path = write_v2(tmp_path / "busy.jsonl", recorded, TargetProperties(policy="continuous"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]

    def decode_list(row: dict[str, Any]) -> list[str]:
        return next((op[1] for op in row.get("ops", ()) if op[0] == "decode"), [])

    after_finishes = [
        (i, [op[1] for op in rows[i - 1]["ops"] if op[0] == "finish"])
        for i in range(2, len(rows))
        if rows[i].get("type") == "iteration"
        and len(decode_list(rows[i])) > 1
        and any(op[0] == "finish" for op in rows[i - 1].get("ops", ()))
    ]
    assert len(after_finishes) >= 4
    changes: list[Callable[[list[str], list[str]], None]] = [
        lambda listed, finished: listed.insert(0, finished[0]),  # kept on, listed first
        lambda listed, finished: listed.__setitem__(-1, finished[0]),  # in another's place
        lambda listed, finished: listed.__setitem__(0, finished[0]),
        lambda listed, finished: listed.append(finished[0]),  # kept on, listed last
        lambda listed, finished: listed.reverse(),  # those kept reordered
    ]
    taken = 0
    for trial, change in enumerate(changes):
        for index, finished in after_finishes[trial :: len(changes)][:3]:
            broken = json.loads(json.dumps(rows))
            change(decode_list(broken[index]), finished)
            out = tmp_path / f"changed-{trial}-{index}.jsonl"
            out.write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in broken))
            taken += assert_same(out)
    assert taken > 0


def big_batch_logs(tmp_path: Path, seed: int, count: int) -> list[Path]:
    """Clean logs of 64 to 256 slots, pages of 1 to 16 tokens, tight and roomy pools."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        batch, page = rng.choice((64, 128, 256)), rng.choice((1, 4, 16))
        made = tuple(
            Request(f"r{n}", n // rng.choice((2, 4, 8)), rng.randint(1, 60), rng.randint(1, 50))
            for n in range(batch * 3)
        )
        most = max(-(-(r.prompt_tokens + r.output_tokens) // page) for r in made)
        pool = max(most + 1, int(most * batch * rng.choice((0.3, 0.6, 1.0))))
        workload = Workload(f"big-{i}", Limits(batch, page, pool), made)
        policy, scheduler = rng.choice(
            (("continuous", ContinuousScheduler), ("static", StaticScheduler))
        )
        recorded = run(workload, scheduler, policy)
        properties = TargetProperties(policy=policy)
        paths.append(write_v2(tmp_path / f"big-{i}.jsonl", recorded, properties))
    return paths


@pytest.mark.parametrize(
    "trials", [pytest.param(60, id="ci"), pytest.param(600, id="deep", marks=pytest.mark.slow)]
)
def test_big_batches_broken_at_random_agree(trials: int, tmp_path: Path) -> None:
    """Real batches hold 32 to 256 requests: the paths agree there too, on logs written
    compactly (the reader's fast roads) or not."""
    rng = random.Random(20261201 + trials)
    clean = big_batch_logs(tmp_path, trials, 3 if trials < 100 else 8)
    taken = 0
    for trial in range(trials):
        rows = [json.loads(line) for line in rng.choice(clean).read_text().splitlines()]
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutate(rows, rng)
        separators = (",", ":") if rng.random() < 0.7 else (", ", ": ")
        path = tmp_path / f"broken-{trial}.jsonl"
        path.write_text("".join(json.dumps(row, separators=separators) + "\n" for row in rows))
        taken += assert_same(path)
    assert taken > 0
