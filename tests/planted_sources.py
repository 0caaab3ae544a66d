"""Clean event logs to plant violations into (tests/cover/test_planted_logs.py), in both versions.

Each source is a log of a correct run, decoded line by line: the reference policies over small
busy workloads, the engine scheduler's designs (vLLM v1 with chunked prefill under a small token
budget, prefix sharing and preemption on a tight pool; nano-vllm chunked and classic) over
workloads with shared prefixes, and the recorded logs of tests/logs, the real vLLM one included.
A run of the reference engine is written as version 1 (``log_lines``) and as version 2
(``v2_lines``); a recorded log is read back and written in the other version too, where that
version can say what the log says (a version-1 line cannot preempt a request and admit it again
in one iteration, so the vidur Sarathi and vLLM logs have no version-1 copy).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from kvsched.checks.eventlog.jsonl import log_lines, read_run
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.reference import ContinuousScheduler, StaticScheduler, run
from kvsched.reference.engine import Run
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.spec.properties import TargetProperties
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Limits, Request, Workload

LOGS = Path(__file__).resolve().parent / "logs"
RECORDED = (
    "nano_like.clean",
    "orca_like.clean",
    "vllm_like.clean",
    "vidur_sarathi.preempt_readmit_finish",
    "vllm/chunk_cap_recompute",  # vLLM 0.33.0 itself
)
# Version 1 lumps a preemption's frees with the iteration's: a request preempted and admitted
# again in one iteration cannot be written there.
NO_VERSION_1 = {"vidur_sarathi.preempt_readmit_finish", "vllm/chunk_cap_recompute"}

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Source:
    """One clean log: its name and lines (the header first), in one version."""

    name: str
    version: int
    lines: tuple[str, ...]

    def rows(self) -> Rows:
        """A fresh decoded copy, to plant into."""
        return [json.loads(line) for line in self.lines]


def small_workload(seed: int, prefixes: bool) -> Workload:
    """A dozen requests keeping a small batch busy on a tight pool, pages of 2 or 4 tokens;
    with ``prefixes``, most requests in two groups sharing a system prompt."""
    rng = random.Random(seed)
    page, batch = rng.choice((2, 4)), rng.randint(2, 5)
    made = []
    for i in range(rng.randint(8, 14)):
        prompt, output = rng.randint(2, 24), rng.randint(1, 10)
        group = rng.choice(("", "sys", "tools")) if prefixes else ""
        shared = min(prompt, rng.randint(page, 3 * page)) if group else 0
        made.append(Request(f"r{i}", i // 2 + rng.randint(0, 2), prompt, output, group, shared))
    most = max(-(-(r.prompt_tokens + r.output_tokens) // page) for r in made)
    pool = max(most + 1, most * batch // rng.choice((1, 2, 3)))
    return Workload(f"small-{seed}", Limits(batch, page, pool), tuple(made))


def _engine_runs(seed: int) -> list[tuple[str, Run, TargetProperties]]:
    runs = []
    designs = (
        replace(CONFIGS["vllm-v1"], token_budget=12),  # chunks prompts longer than 12 tokens
        replace(CONFIGS["nano"], token_budget=16),
        CONFIGS["nano-classic"],
    )
    for n, config in enumerate(designs):
        properties = config.properties()
        workload = small_workload(seed * 10 + n, prefixes=config.prefix_caching)
        if properties.reserved_pages:  # the null page is not one of the pool's usable pages
            limits = workload.limits
            workload = replace(workload, limits=replace(limits, pool_pages=limits.pool_pages + 1))
        factory = EngineScheduler.configured(config)
        recorded = run(workload, factory, properties.policy, properties=properties)
        runs.append((f"{config.name}-{seed}", recorded, properties))
    return runs


def _policy_runs(seed: int) -> list[tuple[str, Run, TargetProperties]]:
    runs = []
    for policy, scheduler in (("continuous", ContinuousScheduler), ("static", StaticScheduler)):
        workload = load_teaching_trace() if seed == 0 else small_workload(seed, prefixes=False)
        recorded = run(workload, scheduler, policy)
        runs.append((f"{policy}-{seed}", recorded, TargetProperties(policy=policy)))
    return runs


def _written(name: str, recorded: Run, properties: TargetProperties) -> list[Source]:
    return [
        Source(name, 1, tuple(log_lines(recorded, properties))),
        Source(name, 2, tuple(v2_lines(recorded, properties))),
    ]


@cache
def sources(count: int) -> tuple[Source, ...]:
    """The recorded logs and ``count`` rounds of reference runs, each in both versions
    (the same for the same ``count``: every workload is seeded)."""
    made: list[Source] = []
    for name in RECORDED:
        path = LOGS / f"{name}.jsonl"
        lines = tuple(path.read_text("utf-8").splitlines())
        original = json.loads(lines[0])["version"]
        made.append(Source(name, original, lines))  # the recorded bytes themselves
        recorded, properties = read_run(path)
        other = 3 - original
        made += [
            s
            for s in _written(f"{name}-as-v{other}", recorded, properties)
            if s.version == other and not (other == 1 and name in NO_VERSION_1)
        ]
    for seed in range(count):
        for name, recorded, properties in (*_policy_runs(seed), *_engine_runs(seed)):
            made += _written(name, recorded, properties)
    return tuple(made)


def of_version(version: int, count: int) -> tuple[Source, ...]:
    return tuple(s for s in sources(count) if s.version == version)
