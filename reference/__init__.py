"""The executable reference: page accounting, the page pool, both policies and the engine loop.

Module by module it mirrors spec/semantics.md: :mod:`.page_count` (section 2), :mod:`.pool` (3.3),
:mod:`.scheduler` (3), :mod:`.static` (5.1), :mod:`.continuous` (5.2), :mod:`.engine` (3 and 6)
and :mod:`.metrics` (7).
"""

from kvsched.spec.protocol import SchedulerFactory

from .continuous import ContinuousScheduler
from .engine import Run, SchedulerFault, run
from .metrics import RunMetrics, compute_metrics, percentile
from .page_count import allocate_kv_pages
from .pool import PagePool, PoolError
from .static import StaticScheduler

POLICIES: dict[str, SchedulerFactory] = {
    "static": StaticScheduler,
    "continuous": ContinuousScheduler,
}
"""The reference scheduler of each of the lesson's policies."""

__all__ = [
    "POLICIES",
    "ContinuousScheduler",
    "PagePool",
    "PoolError",
    "Run",
    "RunMetrics",
    "SchedulerFault",
    "StaticScheduler",
    "allocate_kv_pages",
    "compute_metrics",
    "percentile",
    "run",
]
