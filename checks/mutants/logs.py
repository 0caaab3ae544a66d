"""Broken engines a scheduler class cannot stand in for, recorded as event logs.

Some bugs live in the engine rather than the scheduler: the engine decides when requests arrive,
and only an engine with chunked prefill reports which tokens it computed. Each writer here
records a small run of such an engine into a working directory and returns the log's path;
``buggy=False`` writes the same engine without its bug, the control the zoo's tests check clean.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kvsched.checks.eventlog.jsonl import write_log
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference import ContinuousScheduler, run
from kvsched.reference.engine import Run
from kvsched.spec.events import IterationEvent, fixed_order
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload, pages_for


def early_arrival_log(workdir: Path, buggy: bool = True) -> Path:
    """A log from a simulator that delivers each request in the iteration of its arrival time
    instead of the next one (``arrival <= n`` for ``arrival < n``), so b, arriving at time 2,
    is admitted in iteration 2."""
    workload = Workload(
        name="early-arrival",
        limits=Limits(batch_limit=2, page_size=4, pool_pages=8),
        requests=(Request("a", 0, 3, 4), Request("b", 2, 5, 2)),
    )
    # The off-by-one clock: the simulator sees every arrival one time unit early.
    early = 1 if buggy else 0
    seen = replace(
        workload,
        requests=tuple(replace(r, arrival=max(r.arrival - early, 0)) for r in workload.requests),
    )
    recorded = run(seen, ContinuousScheduler, policy="continuous")
    path = workdir / "early-arrival.jsonl"
    write_log(replace(recorded, workload=workload), path)
    return path


CHUNK = 4
"""The chunked-prefill engine's token budget per iteration."""


def partial_prefill_log(workdir: Path, buggy: bool = True) -> Path:
    """A log from an engine with chunked prefill that samples a token from every chunk, also
    from one that stops short of the prompt's end: request a, with a 6-token prompt, gets a
    token from its first chunk of 4 (the output of a half-read prompt)."""
    request = Request("a", 0, 6, 2)
    limits = Limits(batch_limit=1, page_size=4, pool_pages=4)
    workload = Workload("partial-prefill", limits, (request,))
    computed = generated = 0
    table: tuple[int, ...] = ()
    events: list[IterationEvent] = []
    while generated < request.output_tokens:
        n = len(events) + 1
        # Each iteration computes what the request has not computed yet, up to the budget.
        chunk = min(CHUNK, request.prompt_tokens + generated - computed)
        computed += chunk
        grown = tuple(range(len(table), pages_for(computed, limits.page_size)))
        before, table = table, table + grown
        samples = buggy or computed == request.prompt_tokens + generated  # BUG when buggy
        generated += samples
        done = generated == request.output_tokens
        admitted = ("a",) if n == 1 else ()
        events.append(
            IterationEvent(
                iteration=n,
                arrived=("a",) if n == 1 else (),
                admitted=admitted,
                active=("a",),
                decoded=("a",) if samples else (),
                finished=("a",) if done else (),
                page_tables={"a": table},
                allocated={"a": grown} if grown else {},
                freed={"a": table} if done else {},
                free_pages=limits.pool_pages - (0 if done else len(table)),
                waiting=(),
                schedule=fixed_order({"a": before}, (), {}, admitted, {"a": table}, {})[0],
                computed={"a": chunk},
            )
        )
    properties = TargetProperties(
        policy="continuous", admission="lazy", token_budget=CHUNK, chunked_prefill=True
    )
    path = workdir / "partial-prefill.jsonl"
    write_log(Run(workload, "continuous", tuple(events), drained=True), path, properties)
    return path


MUTANTS: tuple[Mutant, ...] = (
    Mutant("token from a partial prefill", "a chunk short of the prompt's end yields a token",
           "DEC-3", write=partial_prefill_log),
    Mutant("admission before arrival", "the engine's clock delivers arrivals a step early",
           "REQ-1", write=early_arrival_log),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
