"""The one boundary between kvsched and a scheduler under test (spec/semantics.md, section 4).

A scheduler is built from the run's :class:`~kvsched.spec.workload.Limits` and then driven, one
iteration at a time, by the engine loop, which plays the model runner:

1. ``add_request(request)`` for every request whose arrival time has come (section 3.1);
2. ``schedule()`` returns the iteration's :class:`ScheduledBatch`: who joins, who decodes, and the
   page table of every active request after the pages for this iteration's token were taken;
3. the engine "runs the model": one token per entry of ``ScheduledBatch.decode``;
4. ``update_from_output(output)`` returns the :class:`StepOutcome`: who finished, which pages they
   released, and how many pages the scheduler now counts as free.

This is the split of vLLM's ``schedule()`` / ``update_from_output()`` and nano-vllm's
``schedule()`` / ``postprocess()``, so a real engine's scheduler fits behind a thin adapter. The
reference schedulers implement it like any third party does.

Declaring a policy. Some invariants constrain one batching policy only (section 8: BATCH-2 for
static batching, BATCH-3 for continuous batching, and BATCH-4's admission order for both). A
scheduler says which policy it implements with a class attribute::

    class MyScheduler:
        policy = "continuous"  # or "static"

or the check is told on the command line (``kvsched check pkg.mod:MyScheduler --policy
continuous``, which also overrides a declaration). A scheduler that declares neither is checked
against every other invariant, and the check says in words which ones it could not check and how
to declare the policy, rather than show them as quietly "not applicable".

Declaring a design. A scheduler that works the way a real engine does declares it with a class
attribute ``properties = TargetProperties(...)`` (:mod:`kvsched.spec.properties`): everything an
event log's header may declare (spec/eventlog.md, section 4), its policy included. A scheduler
whose preemption folds what a request processed into its prompt, as vidur's does, declares
``TargetProperties(preemption=True, restart="fold", ...)``; ``restart="recompute"``, the default,
is vLLM's (eventlog.md 4.3.1).

**Version 2** (section 4.1) is vLLM's token accounting: there is no prefill or decode phase, each
request has computed tokens that catch up with its tokens. A batch that sets ``computed`` reports,
per request, the tokens computed this iteration (a prompt chunk, a recompute or one decode token),
and may report prefix-cache hits, shared pages, preemptions with the pages they released, and its
waiting queue. The lesson protocol is version 2 with those fields left at their defaults, so
existing schedulers keep working unchanged. Every field is a plain int, string, tuple or mapping
of them, so the data crosses a process boundary as it is.

**State slots** (section 4.2). A target that declares ``state_slots`` (a per-request state pool
beside the pages, as SGLang's mamba slots) reports who holds which slot after each call:
``ScheduledBatch.slots`` after ``schedule()``, ``StepOutcome.slots`` and ``free_slots`` after
``update_from_output()``. Both snapshots are needed: a slot taken by a request whose admission
then fails shows after the schedule, one kept by a request finished or aborted in the update only
after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .workload import Limits, Request


@dataclass(frozen=True)
class ScheduledBatch:
    """What a scheduler decided for one iteration (section 4)."""

    admitted: tuple[str, ...]
    """Requests that join the batch in this iteration, in admission order."""
    decode: tuple[str, ...]
    """Requests that produce a token in this iteration; each entry yields one token."""
    page_tables: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Physical page ids held by every active request, including this iteration's new pages."""

    # Version 2 (section 4.1). The defaults are the lesson protocol.
    computed: Mapping[str, int] | None = None
    """Tokens whose KV each request computes in this iteration; ``None``: the lesson model (the
    admission iteration computes the prompt and the first token, each later one a token). A
    request absent from the mapping computes nothing."""
    cached: Mapping[str, int] = field(default_factory=dict)
    """Tokens whose KV a request took from the prefix cache in this iteration, not computed."""
    shared: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Pages new in a request's table that it took by reference (a prefix-cache hit)."""
    preempted: tuple[str, ...] = ()
    """Requests preempted by recompute in this ``schedule()``, before any allocation: they left
    the batch, released their pages and went back to the waiting queue."""
    preempt_freed: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """The pages each preempted request released. Kept apart from :attr:`StepOutcome.freed` so
    that a request preempted, re-admitted and finished in one iteration frees each page once."""
    waiting: tuple[str, ...] | None = None
    """The waiting queue after this ``schedule()``, head first, as the scheduler holds it; the
    monitor checks the declared admission order against it instead of predicting it. ``None``:
    not reported (the engine keeps arrival order, preempted requests at the head)."""
    slots: Mapping[str, int] | None = None
    """Under a declared ``state_slots`` (section 4.2): every request that holds a state slot
    after this ``schedule()``, with its slot id, whether it runs or not (a holder that does not
    run is how a leak is named). ``None``: the target has no state slots."""


@dataclass(frozen=True)
class ModelOutput:
    """What the model produced in one iteration: tokens per request (1 per decode entry)."""

    tokens: Mapping[str, int]
    stopped: tuple[str, ...] = ()
    """Requests whose token in this iteration was their last (an EOS or ``max_tokens``): how a
    scheduler that does not read ``Request.output_tokens`` learns a request is done, as real
    engines do."""


@dataclass(frozen=True)
class StepOutcome:
    """How the scheduler closed an iteration (section 3.5)."""

    finished: tuple[str, ...]
    """Requests that produced their last token in this iteration."""
    freed: Mapping[str, tuple[int, ...]]
    """Pages released in this iteration, by the request that held them."""
    free_pages: int
    """Pages the scheduler's pool counts as free after this iteration."""
    slots: Mapping[str, int] | None = None
    """Under a declared ``state_slots``: every request holding a state slot after this update,
    with its slot id, as :attr:`ScheduledBatch.slots`; ``None``: no state slots."""
    free_slots: int | None = None
    """Under a declared ``state_slots``: the slots the target's pool counts as free after this
    update; ``None``: no state slots."""


@runtime_checkable
class Scheduler(Protocol):
    """An iteration-level scheduler with a paged KV cache."""

    def add_request(self, request: Request) -> None:
        """Take an arrived request into the waiting queue."""

    def schedule(self) -> ScheduledBatch:
        """Decide the next iteration: admissions, decodes and page tables."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        """Record the iteration's tokens; finish and free the requests that are done."""


SchedulerFactory = Callable[[Limits], Scheduler]
"""Builds a scheduler for a run; a scheduler class taking ``Limits`` is one."""
