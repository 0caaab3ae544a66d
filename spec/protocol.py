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


@dataclass(frozen=True)
class ModelOutput:
    """What the model produced in one iteration: tokens per request (1 per decode entry)."""

    tokens: Mapping[str, int]


@dataclass(frozen=True)
class StepOutcome:
    """How the scheduler closed an iteration (section 3.5)."""

    finished: tuple[str, ...]
    """Requests that produced their last token in this iteration."""
    freed: Mapping[str, tuple[int, ...]]
    """Pages released in this iteration, by the request that held them."""
    free_pages: int
    """Pages the scheduler's pool counts as free after this iteration."""


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
