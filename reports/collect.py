"""Run workloads under policies and gather what a report shows.

A report is made from runs, never from remembered figures. Each (workload, policy) case runs on
the stepped engine (:func:`kvsched.reference.run`, then
:func:`kvsched.reference.compute_metrics`, spec/semantics.md section 7), whose events give the
per-iteration plots; or, for large workloads under a reference policy, on the event-jumping
replay (:func:`kvsched.reference.fastpath.replay`), which gives the same metrics and the same
per-request iterations but keeps nothing per iteration, so its report has no per-iteration plots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvsched.reference import POLICIES, Run, RunMetrics, compute_metrics, run
from kvsched.reference.efficiency import Efficiency, measure
from kvsched.reference.fastpath import REFERENCE_POLICIES, replay
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import (
    ModelOutput,
    ScheduledBatch,
    Scheduler,
    SchedulerFactory,
    StepOutcome,
)
from kvsched.spec.workload import Limits, Request, Workload

from .progress import Progress
from .results import (
    EFFICIENCY_UNITS,
    RUN_METRIC_UNITS,
    CaseResult,
    ResultSet,
    workload_content,
)
from .series import IterationSeries, RequestSpan, iteration_series, request_spans

STEPPED, FAST = "stepped", "fast"
FAST_FROM = 5000
"""With engine "auto", workloads of at least this many requests take the fast path."""
REFERENCE_SOURCE = "runs of the reference engine (kvsched.reference)"


@dataclass(frozen=True)
class CaseRun:
    """One workload run under one policy: its metrics and what the plots draw."""

    workload: Workload
    policy: str
    engine: str
    """STEPPED or FAST."""
    metrics: RunMetrics
    spans: tuple[RequestSpan, ...]
    """Per request, declared order."""
    series: IterationSeries | None
    """Per iteration; None from the fast path, which keeps nothing per iteration."""
    problem: str = ""
    """Why the figures are partial: the scheduler's fault (PROTO-1) or a run that did not drain
    by the iteration bound (LIVE-1). Empty for a complete run."""
    under_test: bool = False
    """The scheduler is not the reference of its policy's name (``--policies NAME=TARGET``)."""
    efficiency: Efficiency | None = None
    """The efficiency layer's figures (EFF-1..EFF-4); None from the fast path."""

    @property
    def result(self) -> CaseResult:
        figures = self.metrics.as_dict()
        metrics = {name: _number(figures[name]) for name in RUN_METRIC_UNITS}
        units = dict(RUN_METRIC_UNITS)
        if self.efficiency is not None:
            for name, unit in EFFICIENCY_UNITS.items():
                metrics[name] = float(getattr(self.efficiency, name))
                units[name] = unit
        limits = self.workload.limits
        return CaseResult(
            self.workload.name,
            self.policy,
            metrics,
            units,
            content=workload_content(self.workload.requests),
            limits={
                "batch_limit": limits.batch_limit,
                "page_size": limits.page_size,
                "pool_pages": limits.pool_pages,
            },
        )


def choose_engine(workload: Workload, policy: str, factory: SchedulerFactory, engine: str) -> str:
    """The engine for a case: ``engine`` is "auto", STEPPED or FAST.

    The fast path replays the *reference* policies only, so a scheduler under test always runs
    stepped, even under a reference policy's name; asking for FAST for one is an error.
    """
    reference = policy in REFERENCE_POLICIES and factory is POLICIES.get(policy)
    if engine == FAST and not reference:
        raise ValueError(
            f"the fast path replays the reference policies only; '{policy}' is a scheduler "
            "under test, which must run stepped"
        )
    if engine == "auto":
        return FAST if reference and len(workload.requests) >= FAST_FROM else STEPPED
    return engine


def run_cases(
    workloads: Sequence[Workload],
    policies: Mapping[str, SchedulerFactory],
    engine: str = "auto",
    progress: Progress | None = None,
) -> tuple[CaseRun, ...]:
    """Every workload under every policy, workloads outer, policies in the given order."""
    return tuple(
        run_case(
            workload, policy, factory, choose_engine(workload, policy, factory, engine), progress
        )
        for workload in workloads
        for policy, factory in policies.items()
    )


def run_case(
    workload: Workload,
    policy: str,
    factory: SchedulerFactory,
    engine: str = STEPPED,
    progress: Progress | None = None,
) -> CaseRun:
    label = f"{workload.name} / {policy}"
    if engine == FAST:
        if progress is not None:
            progress.start(f"{label} (fast path)", len(workload.requests))
        fast = replay(workload, policy)
        if progress is not None:
            progress.finish()
        spans = tuple(
            RequestSpan(r.id, r.arrival, fast.admitted[i], fast.finished[i])
            for i, r in enumerate(workload.requests)
        )
        return CaseRun(workload, policy, FAST, fast.metrics, spans, None)
    declared = declared_properties(factory)
    if progress is not None and progress.enabled:
        progress.start(label, len(workload.requests))
        stepped = run(workload, _counting(factory, progress), policy=policy, properties=declared)
        progress.finish()
    else:
        stepped = run(workload, factory, policy=policy, properties=declared)
    return case_of_run(workload, policy, factory, stepped)


def declared_properties(factory: SchedulerFactory) -> TargetProperties | None:
    """What the scheduler declares (a fold restart, chunked prefill): it sets what its run may
    take, and what the monitor excuses."""
    declared = getattr(factory, "properties", None)
    return declared if isinstance(declared, TargetProperties) else None


def case_of_run(
    workload: Workload, policy: str, factory: SchedulerFactory, stepped: Run
) -> CaseRun:
    """The figures of a stepped run of ``factory`` over ``workload``, shown as ``policy``."""
    problem = ""
    if stepped.fault is not None:
        fault = stepped.fault
        problem = (
            f"the scheduler failed in iteration {fault.iteration}, {fault.call}: {fault.message}"
        )
    elif not stepped.drained:
        problem = "the run did not drain by the iteration bound (LIVE-1)"
    return CaseRun(
        workload,
        policy,
        STEPPED,
        compute_metrics(workload, stepped.events),
        request_spans(workload, stepped.events),
        iteration_series(workload, stepped.events),
        problem,
        under_test=factory is not POLICIES.get(policy),
        efficiency=measure(workload, stepped.events),
    )


def results_of(cases: Sequence[CaseRun]) -> ResultSet:
    tested = sorted({case.policy for case in cases if case.under_test})
    source = REFERENCE_SOURCE
    if tested:
        source += f", with the scheduler under test as {', '.join(tested)}"
    return ResultSet(source=source, cases=tuple(case.result for case in cases))


def _counting(factory: SchedulerFactory, progress: Progress) -> SchedulerFactory:
    def build(limits: Limits) -> Scheduler:
        return _CountingScheduler(factory(limits), progress)

    return build


class _CountingScheduler:
    """Forwards every call unchanged and advances the progress bar by the requests finished.

    Exceptions and malformed answers pass through untouched, so the engine judges the scheduler
    exactly as it would without the bar.
    """

    def __init__(self, inner: Scheduler, progress: Progress) -> None:
        self.inner = inner
        self.progress = progress

    def add_request(self, request: Request) -> None:
        self.inner.add_request(request)

    def schedule(self) -> ScheduledBatch:
        return self.inner.schedule()

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = self.inner.update_from_output(output)
        finished = getattr(outcome, "finished", ())
        if isinstance(finished, tuple | list):
            self.progress.advance(len(finished))
        return outcome


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"metric value {value!r} is not a number")
    return value
