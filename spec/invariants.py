"""The invariant catalogue (spec/semantics.md, section 8), as data, in layers.

Each invariant has a stable id that findings, reports, tests and the reference cite. ``applies_to``
names the policies it constrains ("any" for every scheduler); ``enforced_by`` says where the
reference enforces it and which checks verify it. tests/cover/test_catalogue.py holds every id to a
registered monitor check, a mutant of the zoo and a row of the prose table.

The layers (section 8) say what a violation means. **Safety** holds for every engine whatever it
declares; **liveness** is about progress; **conformance** applies only where the target declares
the rule (a policy, an admission order, a chunking mode); **efficiency** is measured, never
violated: :data:`EFFICIENCY` lists its figures, which carry no invariant id.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocabulary import LAYERS, Layer

__all__ = [
    "BY_ID",
    "CATALOGUE",
    "EFFICIENCY",
    "FINDING_ORDER",
    "LAYERS",
    "Figure",
    "Invariant",
    "Layer",
    "layer_of",
    "precedence",
]


@dataclass(frozen=True)
class Invariant:
    id: str
    title: str
    rationale: str
    applies_to: tuple[str, ...]
    enforced_by: str
    layer: Layer = "safety"
    malformed: bool = False
    """Broken by an answer that cannot be read (the protocol): whatever else the answer says is
    then no evidence, so such a violation is named before any other of its iteration."""


@dataclass(frozen=True)
class Figure:
    """An efficiency figure: measured and reported for every run, never a violation."""

    id: str
    title: str
    definition: str


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
        "PAGE-6",
        "A prefix-cache hit takes only pages holding that very prefix, and no more tokens "
        "than they hold",
        "A page evicted and reused, or a stale hash, hands a request another request's keys "
        "and values: wrong output with no error.",
        ("any",),
        "reference/engine_scheduler/blocks.py allocate; monitor (checks/monitor/prefix.py)",
    ),
    Invariant(
        "PAGE-7",
        "Under asynchronous scheduling, a page given back in an iteration is handed out fresh "
        "again no earlier than two iterations later",
        "An engine that schedules step n + 1 while step n still runs (vLLM's async scheduling, "
        "#45357) lets the step in flight write the blocks a finish, an abort or a preemption "
        "gave back: handed to another request at once, one block is written by two steps.",
        ("declared",),
        "checks/monitor/fenced.py freed_pages_wait_for_the_step_in_flight (the monitor alone: "
        "the reference schedules synchronously)",
    ),
    Invariant(
        "SLOT-1",
        "State slots are conserved: each request of the batch holds exactly one slot of the "
        "declared pool, no slot is held by two requests, and free slots plus slots held equal "
        "the pool",
        "A hybrid model keeps each running request's recurrent state in a slot of a fixed pool "
        "beside the pages (SGLang's mamba slots): two requests in one slot overwrite each "
        "other's state, a request without one has none to decode from, and a free count that "
        "drifts admits into slots that are not there or leaves free ones unused.",
        ("declared",),
        "checks/monitor/state_slots.py state_slots_after_the_schedule; the reference takes and "
        "gives back slots in reference/engine_scheduler/scheduler.py",
    ),
    Invariant(
        "SLOT-2",
        "No request holds a state slot unless it runs: one finished, aborted, preempted or "
        "sent back to the queue by a failed admission has given its slot back",
        "A slot kept by a request that no longer runs is lost to the pool: SGLang leaked mamba "
        "slots on abort (#12693) and on an admission whose page allocation failed after the "
        "slot was taken (#16067), until no request could be admitted.",
        ("declared",),
        "checks/monitor/state_slots.py state_slots_after_the_update; the reference gives a slot "
        "back in reference/engine_scheduler/scheduler.py",
    ),
    Invariant(
        "DEC-1",
        "An active request produces at most one token per iteration (exactly one in the lesson "
        "model), and has KV for no token that does not exist",
        "A decode step samples one token per sequence; two is a double-scheduled request, none "
        "in the lesson model a request left out of the step.",
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
        layer="conformance",
    ),
    Invariant(
        "BATCH-3",
        "Continuous batching never leaves a slot idle while the head of the waiting queue fits",
        "Work conservation is continuous batching's whole point.",
        ("continuous",),
        "reference/continuous.py admission_open; monitor",
        layer="conformance",
    ),
    Invariant(
        "BATCH-4",
        "Admission follows the declared order: fcfs (by arrival, ties in workload order, "
        "preempted requests at the head, or the tail if declared), priority or shortest prompt "
        "first",
        "Fairness as promised; skipping the head is how requests starve. Admissions are read "
        "from the queue the target reports, and under fcfs that queue must be in order too.",
        ("static", "continuous", "declared"),
        "reference/scheduler.py schedule; monitor (checks/monitor/order.py)",
        layer="conformance",
    ),
    Invariant(
        "BATCH-5",
        "Prompts are chunked only as declared: never, or only the first request of a batch",
        "nano-vllm chunks only the first prompt of a batch; a chunk elsewhere is a different "
        "engine, whose admission and budget figures mean something else.",
        ("declared",),
        "reference/engine_scheduler/scheduler.py _may_chunk; monitor (checks/monitor/order.py)",
        layer="conformance",
    ),
    Invariant(
        "BATCH-6",
        "No request of the batch is skipped while the token budget has room, where the target "
        "declares that it serves the batch first (a prefill held back by a declared cap on "
        "partial prefills excepted)",
        "A running request left out of a step with budget to spare stalls for no reason: vLLM's "
        "priority victim removed behind its loop cursor skipped the request after it.",
        ("declared",),
        "reference/engine_scheduler/scheduler.py _run; monitor (checks/monitor/batch.py)",
        layer="conformance",
    ),
    Invariant(
        "LIVE-1",
        "The run drains by the iteration bound: last arrival plus total output tokens",
        "Even one request at a time finishes by then; a request still waiting is starved.",
        ("any",),
        "reference/engine.py iteration_bound; monitor; Z3 bounded model checking",
        layer="liveness",
    ),
    Invariant(
        "LIVE-2",
        "No request waits while nothing runs and the pool and the budget could hold it",
        "An idle engine with a fitting request at the head of its queue is stranded: whatever "
        "its admission rule, it never gets going again.",
        ("any",),
        "reference/engine_scheduler/scheduler.py _admit; monitor (checks/monitor/liveness.py)",
        layer="liveness",
    ),
    Invariant(
        "LIVE-3",
        "No request is preempted twice without progress in between: no token produced and no "
        "KV computed beyond what any request held before",
        "Preemption that makes no progress cycles through the same states forever (thrash).",
        ("any",),
        "reference/engine_scheduler/scheduler.py _victim; monitor (checks/monitor/liveness.py); "
        "Z3 bounded model",
        layer="liveness",
    ),
    Invariant(
        "LIVE-4",
        "No preemption for nothing: an iteration that preempts and computes nothing needed its "
        "last preemption",
        "An engine whose preemptions do not make room in their own step (vLLM's deferred frees, "
        "#49674) preempts request after request down the running queue and computes nothing: "
        "every victim recomputes, and the cascade can repeat step after step.",
        ("any",),
        "checks/monitor/futile.py no_preemption_for_nothing (the monitor alone: the "
        "reference's running loop preempts only while the pages do not fit, "
        "reference/engine_scheduler/scheduler.py _run)",
        layer="liveness",
    ),
    Invariant(
        "LIVE-5",
        "A request no scheduler can hold is rejected or aborted as the target declares, and "
        "blocks no request behind it",
        "A request larger than the whole pool but within the model's length, left at the head "
        "of the queue, is retried every step and blocks everyone behind it forever (vLLM "
        "#39734).",
        ("any",),
        "checks/monitor/infeasible.py infeasible_requests_are_rejected; the reference rejects "
        "as declared (reference/engine_scheduler/scheduler.py _reject)",
        layer="liveness",
    ),
    Invariant(
        "PROTO-1",
        "The scheduler answers every call with a well-formed value and does not raise",
        "A scheduler that crashes or returns garbage cannot be judged on the rest.",
        ("any",),
        "reference/engine.py _malformed_batch, _malformed_outcome",
        malformed=True,
    ),
)

BY_ID: dict[str, Invariant] = {invariant.id: invariant for invariant in CATALOGUE}

EFFICIENCY: tuple[Figure, ...] = (
    Figure(
        "EFF-1",
        "Idle slot-iterations while a fitting request waited",
        "Per iteration, the free slots while the head of the waiting queue's prompt and output "
        "so far plus one token fitted the free pages; summed over the run. Head-of-line "
        "blocking, first-only chunking, padded budgets and periodic prefill cost this by design.",
    ),
    Figure(
        "EFF-2",
        "Pages reserved but unused (page-iterations)",
        "Per iteration, the pages held beyond ceil(KV tokens / page size) of each active request, "
        "summed over the run: what whole-prompt or max-length reservation costs.",
    ),
    Figure(
        "EFF-3",
        "Preemptions",
        "Requests sent back to the waiting queue by recompute preemption, counted per event.",
    ),
    Figure(
        "EFF-4",
        "Recomputed tokens",
        "KV tokens computed again after a preemption had dropped them.",
    ),
)
"""The efficiency layer: figures measured on every run and reported, never a violation."""


FINDING_ORDER: tuple[Layer, ...] = ("safety", "conformance", "liveness")
"""Which of several violations in one iteration a verdict names first, after a malformed answer:
the most specific. A broken page table or token is a fault in itself; a rule of the declared
design broken beside it is often its consequence; a stalled or starved queue is what many faults
end in. Not :data:`LAYERS`' order, which is the order verdicts list the rows in."""


def precedence(invariant_id: str) -> int:
    """The rank of a violation of ``invariant_id`` among those of one iteration, lowest first:
    a malformed answer (:attr:`Invariant.malformed`), then by layer in :data:`FINDING_ORDER`."""
    invariant = BY_ID.get(invariant_id)
    if invariant is None or invariant.layer not in FINDING_ORDER:
        return len(FINDING_ORDER) + 1
    return 0 if invariant.malformed else 1 + FINDING_ORDER.index(invariant.layer)


def layer_of(invariant_id: str) -> Layer:
    """The layer of a catalogue id, or ``efficiency`` for a figure's id."""
    invariant = BY_ID.get(invariant_id)
    return invariant.layer if invariant is not None else "efficiency"
