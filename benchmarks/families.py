"""Figures of the seeded randomized workload families (reference/families.py), both policies.

Deterministic, like the teaching trace's: a family, a size and the seed ``SEED`` fix the workload,
and the reference policies fix the figures, so ``kvsched bench`` gates on these. Sizes 10^2 run
through the stepped engine loop; 10^3 to 10^5 through the event-jumping replay
(reference/fastpath.py), which tests/cover/test_fastpath.py holds to the stepped loop's exact
figures.
Either implementation regressing moves figures here.
"""

from __future__ import annotations

from types import ModuleType

from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.reference.metrics import RunMetrics

families: ModuleType | None
fastpath: ModuleType | None
try:
    from kvsched.reference import families, fastpath
except ImportError:  # a base commit older than the families: its figures go missing, not wrong
    families = fastpath = None

SEED = 0
FAMILY_NAMES = sorted(families.FAMILIES) if families else ["unavailable"]
POLICY_NAMES = sorted(POLICIES)

Key = tuple[str, int, str]
Figures = dict[Key, dict[str, float]]


def _figures(metrics: RunMetrics) -> dict[str, float]:
    return {k: v for k, v in metrics.as_dict().items() if isinstance(v, int | float)}


class _Tracks:
    """The tracked figures; subclasses say which sizes and how the runs are made."""

    param_names = ("family", "size", "policy")
    timeout = 900

    def track_iterations(self, figures: Figures, family: str, size: int, policy: str) -> float:
        return figures[family, size, policy]["iterations"]

    track_iterations.unit = "iterations"  # type: ignore[attr-defined]

    def track_utilization(self, figures: Figures, family: str, size: int, policy: str) -> float:
        return figures[family, size, policy]["utilization"]

    track_utilization.unit = "fraction"  # type: ignore[attr-defined]

    def track_p95_wait(self, figures: Figures, family: str, size: int, policy: str) -> float:
        return figures[family, size, policy]["p95_wait"]

    track_p95_wait.unit = "iterations"  # type: ignore[attr-defined]

    def track_peak_pages(self, figures: Figures, family: str, size: int, policy: str) -> float:
        return figures[family, size, policy]["peak_pages"]

    track_peak_pages.unit = "pages"  # type: ignore[attr-defined]


class Stepped(_Tracks):
    """10^2 requests per family through the engine loop (reference/engine.py)."""

    params = (FAMILY_NAMES, [100], POLICY_NAMES)

    def setup_cache(self) -> Figures:
        if families is None:
            raise NotImplementedError("this kvsched has no workload families")
        figures: Figures = {}
        for family in FAMILY_NAMES:
            workload = families.generate(family, 100, SEED)
            for policy in POLICY_NAMES:
                events = run(workload, POLICIES[policy]).events
                figures[family, 100, policy] = _figures(compute_metrics(workload, events))
        return figures


class Replayed(_Tracks):
    """10^3 to 10^5 requests per family through the event-jumping replay."""

    params = (FAMILY_NAMES, [1_000, 10_000, 100_000], POLICY_NAMES)

    def setup_cache(self) -> Figures:
        if families is None or fastpath is None:
            raise NotImplementedError("this kvsched has no workload families or replay")
        figures: Figures = {}
        for family in FAMILY_NAMES:
            for size in (1_000, 10_000, 100_000):
                workload = families.generate(family, size, SEED)
                for policy in POLICY_NAMES:
                    metrics = fastpath.replay(workload, policy).metrics
                    figures[family, size, policy] = _figures(metrics)
        return figures
