"""Preemptions taken in by the event-log checker's fast path (checks/eventlog/steady.py): the
victim's lazy steps brought in, its pages frozen for PAGE-6 and given back in the schedule (and
taken again in the same line), its place at the head of the queue, its stamp for LIVE-3, the
bound's allowance. Engine logs that preempt, clean and broken at random around their
preemptions; both paths must agree on each (tests/cover/test_steady.py compares them).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_steady import assert_same, mutate, write_v2

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.reference import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.spec.workload import Limits, Request, Workload


def preempting(seed: int, groups: bool) -> Workload:
    """Requests enough to crowd a small pool, so that the engine preempts every few lines;
    with ``groups``, sharing prefixes (prefix hits, shared pages a victim gives back)."""
    rng = random.Random(seed)
    size = rng.choice((2, 4, 8))
    made = []
    for n in range(rng.randint(20, 40)):
        prompt = rng.randint(4, 60)
        shared = min(2 * size, prompt) if groups else 0
        group = f"g{n % 3}" if groups else ""
        made.append(
            Request(f"r{n}", n // rng.randint(1, 3), prompt, rng.randint(8, 60), group, shared)
        )
    most = max(-(-(r.prompt_tokens + r.output_tokens) // size) for r in made)
    limits = Limits(
        batch_limit=rng.randint(4, 12), page_size=size, pool_pages=most + rng.randint(2, 2 * most)
    )
    return Workload(f"preempting-{seed}", limits, tuple(made))


def engine_logs(tmp_path: Path) -> list[Path]:
    """Engine runs that preempt: vLLM v1's design and nano-vllm's, with and without prefix
    groups (a log without them declares no prefix sharing: the fast path's unshared pages)."""
    paths = []
    for seed in range(10):
        groups = seed % 2 == 0
        name = ("vllm-v1", "nano")[seed % 4 // 2]
        config = replace(CONFIGS[name], token_budget=random.Random(seed).choice((16, 32, 64)))
        properties = config.properties()
        if not groups:
            properties = replace(properties, prefix_sharing=False)
        recorded = run(
            preempting(seed, groups),
            EngineScheduler.configured(config),
            properties=config.properties(),
        )
        paths.append(write_v2(tmp_path / f"{name}-{seed}.jsonl", recorded, properties))
    return paths


def rows_of(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def preempts(row: Any) -> bool:
    return row.get("type") == "iteration" and any(op[0] == "preempt" for op in row["ops"])


def test_clean_preempting_logs_agree_and_their_preemptions_are_taken_in(tmp_path: Path) -> None:
    others = preempting_lines = taken = 0
    for path in engine_logs(tmp_path):
        rows = rows_of(path)
        assert check_stream(path, fast=False).finding is None, path.name  # valid and clean
        assert_same(path)
        if path.name.startswith("vllm-v1"):
            preempting = sum(1 for row in rows if preempts(row))
            preempting_lines += preempting
            others += len(rows) - 1 - preempting
            taken += check_stream(path).fast_lines
    assert preempting_lines >= 50  # the comparison is about lines that preempt
    # More lines taken in than lines that do not preempt: most preemptions are taken in.
    assert taken - others >= preempting_lines // 2, (taken, others, preempting_lines)


def _break_preemption(row: Any, rng: random.Random) -> None:
    """One change to a preemption's line: its victim, its free, its place in the schedule."""
    ops = row["ops"]
    at = next(i for i, op in enumerate(ops) if op[0] == "preempt")
    victim = ops[at][1]
    frees = [op for op in ops if op[0] == "free" and op[1] == victim]
    others = [op[1] for op in ops if op[0] in ("alloc", "compute") and op[1] != victim]
    decodes = [op[1] for op in ops if op[0] == "decode" and op[1]]
    choice = rng.randrange(8)
    if choice == 0 and frees and frees[0][2]:
        frees[0][2].pop(rng.randrange(len(frees[0][2])))  # a page kept (PAGE-4)
    elif choice == 1 and frees and frees[0][2]:
        frees[0][2].append(frees[0][2][0])  # a page given back twice
    elif choice == 2 and frees:
        ops.remove(frees[0])  # no page given back
    elif choice == 3 and (others or decodes):
        ops[at][1] = rng.choice(others or decodes[0])  # another request preempted
        if frees:
            frees[0][1] = ops[at][1]
    elif choice == 4:
        ops.append(ops.pop(at))  # preempted after its step
    elif choice == 5 and decodes:
        decodes[0].append(victim)  # it decodes as it is preempted
    elif choice == 6:
        ops.insert(at, list(ops[at]))  # preempted twice
    else:
        row["waiting"] = [*row.get("waiting", [victim])[1:], victim]  # queued at the tail


def test_preemptions_broken_at_random_agree(tmp_path: Path) -> None:
    """Changes on a preemption's line or the two after it: the ones any line may have
    (test_steady.mutate) and the ones only a preemption has."""
    rng = random.Random(20261204)
    clean = [rows_of(path) for path in engine_logs(tmp_path)]
    for trial in range(200):
        rows = json.loads(json.dumps(rng.choice(clean)))
        sites = [i for i, row in enumerate(rows) if preempts(row)]
        at = rng.choice(sites)
        if rng.random() < 0.5:
            _break_preemption(rows[at], rng)
        else:
            near = [row for row in rows[at : at + 3] if row.get("type") == "iteration"]
            mutate(rows, rng, rng.choice(near))
        path = tmp_path / f"broken-{trial}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        assert_same(path)
