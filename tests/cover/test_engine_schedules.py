"""The engine scheduler's schedules, pinned: a faster scheduler must decide exactly the same.

Two guards. The lesson's two policies, as configurations of the engine scheduler, choose who runs
when exactly as the lesson's own schedulers (reference/continuous.py, reference/static.py), an
independent implementation, on seeded families. And for the designs that preempt, share prefixes
and order by priority, where no second implementation exists, every answer the scheduler gives
(each ``ScheduledBatch`` and ``StepOutcome``, field by field, in order) is hashed and compared
with a digest pinned from the scheduler before its sequences compared by identity: a change of
any digest is a change of schedule, to be made on purpose or not at all.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace

import pytest

from kvsched.reference import POLICIES
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import CONFIGS, EngineConfig, EngineScheduler
from kvsched.reference.families import FAMILIES, SHARED_PREFIX, Family, generate
from kvsched.spec.protocol import ModelOutput
from kvsched.spec.workload import Workload

VLLM = CONFIGS["vllm-v1"]
DESIGNS: dict[str, EngineConfig] = {
    "vllm-v1": VLLM,
    "nano": CONFIGS["nano"],
    "nano-classic": CONFIGS["nano-classic"],
    "priority": replace(VLLM, order="priority", victim="priority", name="priority"),
    "shortest-first": replace(VLLM, order="shortest-first", name="shortest-first"),
    "watermark": replace(VLLM, watermark_pages=4, name="watermark"),
    "admit-after-preemption": replace(VLLM, admit_after_preemption=True, name="aap"),
    "budget-64": replace(VLLM, token_budget=64, name="budget-64"),
}
GROUPED: dict[str, Family] = {
    "shared-prefix": SHARED_PREFIX,
    "short": replace(FAMILIES["poisson-short-tight"], prefix_groups=4, name="short-grouped"),
    "heavy": replace(FAMILIES["bursty-heavy-tight"], prefix_groups=3, name="heavy-grouped"),
}
CASES = [("shared-prefix", 40, 0), ("short", 300, 1), ("heavy", 120, 2)]

PINNED = {
    "shared-prefix-40-s0/admit-after-preemption": "aa575781710ee84f",
    "shared-prefix-40-s0/budget-64": "943bafa46af16c43",
    "shared-prefix-40-s0/nano": "302f60543b8b8616",
    "shared-prefix-40-s0/nano-classic": "dfdfb6deab0f5e8a",
    "shared-prefix-40-s0/priority": "b70c0563d40fbf20",
    "shared-prefix-40-s0/shortest-first": "eb4d9f539d39263e",
    "shared-prefix-40-s0/vllm-v1": "f581af514aea36ec",
    "shared-prefix-40-s0/watermark": "399390b471c48e26",
    "short-300-s1/admit-after-preemption": "562c1422cbc06a2c",
    "short-300-s1/budget-64": "7c7b91b10471b58c",
    "short-300-s1/nano": "98989f9b0b918af9",
    "short-300-s1/nano-classic": "98989f9b0b918af9",
    "short-300-s1/priority": "f38442d85ae9a0cb",
    "short-300-s1/shortest-first": "ac891d0d88a16415",
    "short-300-s1/vllm-v1": "562c1422cbc06a2c",
    "short-300-s1/watermark": "7edeb71129395d1a",
    "heavy-120-s2/admit-after-preemption": "652d0ca1c6b200dc",
    "heavy-120-s2/budget-64": "f79ef5270eddc250",
    "heavy-120-s2/nano": "cca2c52839a4fbc6",
    "heavy-120-s2/nano-classic": "0ca23123676b813c",
    "heavy-120-s2/priority": "5c6a171a697c593a",
    "heavy-120-s2/shortest-first": "3c57c8fa9e7fee3f",
    "heavy-120-s2/vllm-v1": "652d0ca1c6b200dc",
    "heavy-120-s2/watermark": "2ce0c9c00844937e",
}


def _workload(family: str, size: int, seed: int, design: str) -> Workload:
    workload = generate(GROUPED[family], size, seed)
    if design == "priority":  # five priority levels, spread over arrival order
        requests = tuple(replace(r, priority=(i * 7) % 5) for i, r in enumerate(workload.requests))
        workload = replace(workload, requests=requests)
    if DESIGNS[design].null_page:  # the page the null block takes (section 1)
        limits = replace(workload.limits, pool_pages=workload.limits.pool_pages + 1)
        workload = replace(workload, limits=limits)
    return workload


def answers(workload: Workload, config: EngineConfig) -> tuple[str, Counter[str]]:
    """The digest of everything the scheduler answers over the run, and what the run exercised.

    Its own loop (the engine's: arrivals, then ``schedule()``, a token per decode entry, the model
    stopping a request at its output length), so the digest reads the scheduler alone and not
    the engine's event format."""
    scheduler = EngineScheduler(workload.limits, config)
    requests = sorted(workload.requests, key=lambda r: r.arrival)
    owed = {r.id: r.output_tokens for r in requests}
    digest, seen = hashlib.sha256(), Counter[str]()
    arrived = finished = iteration = 0
    while finished < len(requests):
        iteration += 1
        assert iteration < 100_000, "the run does not drain"
        while arrived < len(requests) and requests[arrived].arrival < iteration:
            scheduler.add_request(requests[arrived])
            arrived += 1
        batch = scheduler.schedule()
        tokens = dict(Counter(batch.decode))
        for rid, count in tokens.items():
            owed[rid] -= count
        output = ModelOutput(tokens, tuple(rid for rid in tokens if owed[rid] <= 0))
        outcome = scheduler.update_from_output(output)
        finished += len(outcome.finished)
        seen.update(preempted=len(batch.preempted), cached=len(batch.cached), iterations=1)
        answer = [
            batch.admitted,
            batch.decode,
            [[rid, pages] for rid, pages in batch.page_tables.items()],
            [[rid, count] for rid, count in (batch.computed or {}).items()],
            [[rid, count] for rid, count in batch.cached.items()],
            [[rid, pages] for rid, pages in batch.shared.items()],
            batch.preempted,
            [[rid, pages] for rid, pages in batch.preempt_freed.items()],
            batch.waiting,
            outcome.finished,
            [[rid, pages] for rid, pages in outcome.freed.items()],
            outcome.free_pages,
        ]
        digest.update(json.dumps(answer).encode())
    return digest.hexdigest()[:16], seen


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_the_engine_schedulers_answers_are_the_pinned_ones(design: str) -> None:
    seen = Counter[str]()
    for family, size, seed in CASES:
        digest, counts = answers(_workload(family, size, seed, design), DESIGNS[design])
        assert digest == PINNED[f"{family}-{size}-s{seed}/{design}"], (family, counts)
        seen += counts
    # Every design preempts and hits the prefix cache somewhere: the pins cover those paths.
    assert seen["preempted"] > 0 and seen["cached"] > 0, seen


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    "family", ["poisson-short-tight", "bursty-heavy-tight", "poisson-long-tight"]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_lessons_configurations_choose_as_the_lessons_schedulers(
    policy: str, family: str, seed: int
) -> None:
    workload = generate(family, 150, seed)
    engine = run(workload, EngineScheduler.configured(CONFIGS[policy])).events
    lesson = run(workload, POLICIES[policy]).events
    assert len(engine) == len(lesson)
    for ours, theirs in zip(engine, lesson, strict=True):
        # Pages differ by design (lazy tables from a block manager); who runs when may not.
        assert (ours.admitted, ours.active, ours.decoded, ours.finished, ours.waiting) == (
            theirs.admitted,
            theirs.active,
            theirs.decoded,
            theirs.finished,
            theirs.waiting,
        ), ours.iteration
