"""The invariant catalogue (spec/semantics.md, section 8), as data.

Each invariant has a stable id that findings, reports, tests and the reference cite. ``applies_to``
names the policies it constrains ("any" for every scheduler); ``enforced_by`` says where the
reference enforces it and which checks verify it. tests/test_catalogue.py holds every id to a
registered monitor check, a mutant of the zoo and a row of the prose table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Invariant:
    id: str
    title: str
    rationale: str
    applies_to: tuple[str, ...]
    enforced_by: str


CATALOGUE: tuple[Invariant, ...] = (
    Invariant(
        "PAGE-1",
        "Pages are minimal: every active request holds exactly ceil(tokens / page_size) pages",
        "Paging exists to waste less than one page per request; more pages is a leak, fewer is "
        "KV written past the pages held.",
        ("any",),
        "reference/scheduler.py ReferenceScheduler._grow; monitor; Z3 page lemma",
    ),
    Invariant(
        "PAGE-2",
        "No physical page is owned by two requests at once",
        "Two owners of one page overwrite each other's keys and values.",
        ("any",),
        "reference/pool.py PagePool.allocate; monitor; Z3 induction",
    ),
    Invariant(
        "PAGE-3",
        "Pages are conserved: free pages plus pages held equal the pool; a freed page is "
        "allocatable the next iteration",
        "A page freed but never returned shrinks the pool until admission stops.",
        ("any",),
        "reference/pool.py PagePool.free; monitor; Z3 induction",
    ),
    Invariant(
        "PAGE-4",
        "Only active requests hold pages: none held by a finished or waiting request, none once "
        "the run drains",
        "A finished request's pages are the commonest leak in real engines.",
        ("any",),
        "reference/scheduler.py update_from_output; monitor; Z3 induction",
    ),
    Invariant(
        "PAGE-5",
        "Pages in use never exceed the pool, and every page id lies within it",
        "Overcommit means out-of-memory on a real device.",
        ("any",),
        "reference/scheduler.py can_admit; monitor; Z3 induction",
    ),
    Invariant(
        "DEC-1",
        "An active request produces at most one token per iteration",
        "A decode step samples one token per sequence; two is a double-scheduled request.",
        ("any",),
        "reference/scheduler.py schedule; monitor",
    ),
    Invariant(
        "DEC-2",
        "Only active requests produce tokens",
        "A waiting or finished request has no KV cache to decode from.",
        ("any",),
        "reference/scheduler.py schedule; monitor",
    ),
    Invariant(
        "DEC-3",
        "A request produces a token only from KV computed in that iteration, once its prompt "
        "and earlier output are computed",
        "A token is sampled from the last computed position: output from an iteration that "
        "computed nothing, or from a prefill chunk short of the prompt's end, is garbage "
        "(nano-vllm #144).",
        ("any",),
        "reference/scheduler.py schedule; monitor (checks/monitor/tokens.py); only the "
        "real-engine extensions of spec/eventlog.md can break it",
    ),
    Invariant(
        "REQ-1",
        "No request is admitted before it arrives",
        "Causality: the scheduler cannot serve what it has not been sent.",
        ("any",),
        "reference/engine.py arrival delivery; monitor",
    ),
    Invariant(
        "REQ-2",
        "Every request produces exactly its output length and finishes exactly once; none is "
        "lost, none admitted twice",
        "Request conservation: a dropped or twice-finished request is a wrong answer to a user.",
        ("any",),
        "reference/scheduler.py update_from_output; monitor",
    ),
    Invariant(
        "BATCH-1",
        "Active requests never exceed the batch limit",
        "The batch limit is the number of decode slots the device has.",
        ("any",),
        "reference/scheduler.py can_admit; monitor; Z3 induction",
    ),
    Invariant(
        "BATCH-2",
        "Static batching: membership is fixed until the batch drains",
        "This is what static batching means; a mid-batch admission is a different policy.",
        ("static",),
        "reference/static.py admission_open; monitor; Z3 induction",
    ),
    Invariant(
        "BATCH-3",
        "Continuous batching never leaves a slot idle while the head of the waiting queue fits",
        "Work conservation is continuous batching's whole point.",
        ("continuous",),
        "reference/continuous.py admission_open; monitor",
    ),
    Invariant(
        "BATCH-4",
        "Admission follows the declared order: by arrival, ties in workload order",
        "FCFS fairness; skipping the head is how requests starve.",
        ("static", "continuous"),
        "reference/scheduler.py schedule; monitor",
    ),
    Invariant(
        "LIVE-1",
        "The run drains by the iteration bound: last arrival plus total output tokens",
        "Even one request at a time finishes by then; a request still waiting is starved.",
        ("any",),
        "reference/engine.py iteration_bound; monitor; Z3 bounded model checking",
    ),
    Invariant(
        "PROTO-1",
        "The scheduler answers every call with a well-formed value and does not raise",
        "A scheduler that crashes or returns garbage cannot be judged on the rest.",
        ("any",),
        "reference/engine.py _malformed_batch, _malformed_outcome",
    ),
)

BY_ID: dict[str, Invariant] = {invariant.id: invariant for invariant in CATALOGUE}


def applicable(policy: str) -> tuple[Invariant, ...]:
    """The invariants that constrain a scheduler declaring ``policy``."""
    return tuple(i for i in CATALOGUE if "any" in i.applies_to or policy in i.applies_to)
