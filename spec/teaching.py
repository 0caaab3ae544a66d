"""The lesson's teaching trace and the figures the lesson publishes for it (section 9).

The figures are the lesson's, as printed on its page: they are the targets the reconstructed
workload is measured against, not results of ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .vocabulary import PercentileMethod
from .workload import Workload, load_workload

TEACHING_TRACE = Path(__file__).parent / "traces" / "teaching.json"


@dataclass(frozen=True)
class PublishedFigures:
    """One policy's row of the lesson's table, rounded as the lesson prints it."""

    iterations: int
    utilization_percent: int
    p95_wait: int


PUBLISHED = {
    "static": PublishedFigures(iterations=116, utilization_percent=61, p95_wait=19),
    "continuous": PublishedFigures(iterations=88, utilization_percent=86, p95_wait=7),
}

LESSON_PERCENTILE_METHOD: PercentileMethod = "lower"
"""The convention the lesson's P95 waits are read under: ``sorted[floor((n - 1) x 0.95)]``.

The lesson defines none of its metrics; under ``linear`` no workload meets its six figures and
storyboard (a Z3 proof, spec/traces/README.md), under ``lower`` one does, and the teaching trace
declares it.
"""

# The lesson's storyboard: a, b and c form the first batch holding 11 pages; a finishes in
# iteration 14; under continuous batching d takes a's freed slot in iteration 15.
STORYBOARD_FIRST_BATCH = ("a", "b", "c")
STORYBOARD_FIRST_BATCH_PAGES = 11
STORYBOARD_A_FINISHES = 14
STORYBOARD_D_JOINS_CONTINUOUS = 15


def load_teaching_trace() -> Workload:
    return load_workload(TEACHING_TRACE)
