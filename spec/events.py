"""The per-iteration event: what happened in one iteration of a run (spec/semantics.md, section 6).

The engine emits one :class:`IterationEvent` per iteration; the metrics, the runtime monitor and
the JSONL event log are all computed from these and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class IterationEvent:
    """One iteration, numbered from 1, as the engine observed it."""

    iteration: int
    arrived: tuple[str, ...]
    """Requests handed to the scheduler before this iteration was scheduled."""
    admitted: tuple[str, ...]
    """Requests that joined the batch in this iteration."""
    active: tuple[str, ...]
    """The batch during this iteration: admitted in this or an earlier iteration, not yet finished."""
    decoded: tuple[str, ...]
    """One entry per token produced in this iteration (a request listed twice produced two)."""
    finished: tuple[str, ...]
    """Requests the scheduler declared finished at the end of this iteration."""
    page_tables: Mapping[str, tuple[int, ...]]
    """Page table of every active request while it decoded (after this iteration's allocation)."""
    allocated: Mapping[str, tuple[int, ...]]
    """Pages that appeared in a request's page table in this iteration."""
    freed: Mapping[str, tuple[int, ...]]
    """Pages released at the end of this iteration, by request."""
    free_pages: int
    """Free pages the scheduler reported after this iteration."""
    waiting: tuple[str, ...]
    """Arrived requests that were neither active nor finished in this iteration, queue order."""

    @property
    def pages_in_use(self) -> int:
        """Distinct physical pages held while this iteration decoded."""
        return len({page for table in self.page_tables.values() for page in table})
