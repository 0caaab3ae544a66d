"""What the runs a check judged actually reached: the coverage a verdict states.

A pass says only as much as the runs behind it. Two clean verdicts read alike whether the target
ran a thousand crowded workloads with preemptions and prefix hits, or three requests in an empty
pool; :class:`Coverage` tells them apart. It is read off the runs the monitor judged (the events
the engine recorded, never anything the target reports about itself) and summed over a check
like :class:`~.excuses.Excused`: counts add up, extremes keep the largest.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvsched.reference.engine import Run
from kvsched.spec.text import plural


@dataclass(frozen=True)
class Coverage:
    """The extremes and totals reached over the runs judged."""

    runs: int = 0
    """Runs judged to the end, or to the first violation."""
    iterations: int = 0
    """Iterations judged, over every run."""
    requests: int = 0
    """The most requests in one run."""
    context: int = 0
    """The longest context admitted: a request's prompt plus output tokens, in tokens."""
    pool_pressure: int = 0
    """The fullest the pool got, in percent of its pages held while a batch decoded."""
    preemptions: int = 0
    prefix_hits: int = 0
    """Admissions that took tokens from shared pages without computing them."""
    extremes: bool = True
    """Whether the runs' extremes and corners (context, pool, preemptions, prefix hits) were
    read; a recorded log's check counts its iterations only."""

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(
            runs=self.runs + other.runs,
            iterations=self.iterations + other.iterations,
            requests=max(self.requests, other.requests),
            context=max(self.context, other.context),
            pool_pressure=max(self.pool_pressure, other.pool_pressure),
            preemptions=self.preemptions + other.preemptions,
            prefix_hits=self.prefix_hits + other.prefix_hits,
            extremes=self.extremes and other.extremes,
        )

    def describe(self) -> str:
        """One line in words, for the terminal's verdict."""
        if not self.runs:
            return "nothing was run"
        if not self.extremes:
            return f"{plural(self.runs, 'run')}, {plural(self.iterations, 'iteration')}"
        return (
            f"{plural(self.runs, 'run')}, {plural(self.iterations, 'iteration')}; at most "
            f"{plural(self.requests, 'request')} in a run, a context of "
            f"{plural(self.context, 'token')}, the pool {self.pool_pressure}% full; "
            f"{plural(self.preemptions, 'preemption')}, {plural(self.prefix_hits, 'prefix hit')}"
        )

    def to_json(self) -> dict[str, int | None]:
        """The figures by name; the extremes are null where they were not read."""
        extremes = {
            "max_requests": self.requests,
            "max_context_tokens": self.context,
            "max_pool_pressure_percent": self.pool_pressure,
            "preemptions": self.preemptions,
            "prefix_hits": self.prefix_hits,
        }
        return {
            "runs": self.runs,
            "iterations": self.iterations,
            **{key: value if self.extremes else None for key, value in extremes.items()},
        }


def reached(run: Run) -> Coverage:
    """What one run reached, from the engine's own record of it."""
    workload, events = run.workload, run.events
    admitted = {rid for event in events for rid in event.admitted}
    sizes = {r.id: r.prompt_tokens + r.output_tokens for r in workload.requests}
    pool = workload.limits.pool_pages
    fullest = max((event.pages_in_use for event in events), default=0)
    return Coverage(
        runs=1,
        iterations=len(events),
        requests=len(workload.requests),
        context=max((sizes.get(rid, 0) for rid in admitted), default=0),
        pool_pressure=100 * fullest // pool if pool else 0,
        preemptions=sum(len(event.preempted) for event in events),
        prefix_hits=sum(sum(1 for n in event.cached.values() if n > 0) for event in events),
    )
