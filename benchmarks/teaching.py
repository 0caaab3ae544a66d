"""The teaching trace's figures under both policies (spec/semantics.md sections 7 and 9).

Deterministic: the reference engine, stepped one iteration at a time as any scheduler is, over
the lesson's 9-request workload. ``kvsched bench`` gates on these; a change in any of them means
the reference semantics moved.
"""

from __future__ import annotations

from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.spec.teaching import load_teaching_trace

Figures = dict[str, dict[str, float]]


class TeachingTrace:
    params = sorted(POLICIES)
    param_names = ("policy",)

    def setup_cache(self) -> Figures:
        workload = load_teaching_trace()
        figures: Figures = {}
        for policy in POLICIES:
            metrics = compute_metrics(workload, run(workload, POLICIES[policy]).events)
            figures[policy] = {
                k: v for k, v in metrics.as_dict().items() if isinstance(v, int | float)
            }
        return figures

    def track_iterations(self, figures: Figures, policy: str) -> float:
        return figures[policy]["iterations"]

    track_iterations.unit = "iterations"  # type: ignore[attr-defined]

    def track_utilization(self, figures: Figures, policy: str) -> float:
        return figures[policy]["utilization"]

    track_utilization.unit = "fraction"  # type: ignore[attr-defined]

    def track_p95_wait(self, figures: Figures, policy: str) -> float:
        return figures[policy]["p95_wait"]

    track_p95_wait.unit = "iterations"  # type: ignore[attr-defined]

    def track_peak_pages(self, figures: Figures, policy: str) -> float:
        return figures[policy]["peak_pages"]

    track_peak_pages.unit = "pages"  # type: ignore[attr-defined]
