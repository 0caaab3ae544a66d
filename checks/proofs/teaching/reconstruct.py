"""Reconstructing the lesson's teaching trace with Z3 (spec/traces/README.md).

The lesson published six figures and a storyboard for a 9-request workload it did not publish,
and defined none of its metrics. :mod:`.model` writes the two schedules as constraints over the
unknown arrivals and output lengths; this module asks Z3 three things:

1. Under ``linear`` percentiles (the default of spec/semantics.md), can every figure and the
   storyboard hold at once? No: UNSAT is a proof over all workloads (static batching's 116
   iterations bound every arrival and output length, so no bound of ours hides a solution).
   :data:`QUESTIONS` narrows down why.
2. Under which of numpy's percentile conventions can they (:func:`conventions`)?
3. The workload itself, under the lesson's convention (``lower``): the storyboard and all six
   figures exactly. :func:`verify` replays it with the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.query import check, limit
from kvsched.checks.proofs.teaching.model import (
    BATCH_LIMIT,
    FIGURES,
    NAMES,
    TeachingModel,
    p95_weights,
)
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.engine import run
from kvsched.reference.metrics import compute_metrics
from kvsched.reference.static import StaticScheduler
from kvsched.spec.teaching import (
    LESSON_PERCENTILE_METHOD,
    PUBLISHED,
    STORYBOARD_FIRST_BATCH_PAGES,
)
from kvsched.spec.vocabulary import PERCENTILE_METHODS, PercentileMethod
from kvsched.spec.workload import Limits, Request, Workload, pages_for

PAGE_SIZE = 16
POOL_PAGES = 64  # prompts <= 180 and outputs <= 116: any three requests fit, the pool never binds


@dataclass(frozen=True)
class Answer:
    question: str
    verdict: str  # "sat", "unsat" or "unknown"
    seconds: float
    """Wall time: reported, never the budget."""
    units: int = 0
    """Z3 resource units the check consumed; the budget is in these."""


@dataclass(frozen=True)
class Question:
    text: str
    constraints: Callable[[TeachingModel], list[Any]]
    method: PercentileMethod = "linear"


def everything(m: TeachingModel) -> list[Any]:
    """All six figures as the lesson prints them, and the storyboard."""
    return [*(m.figure(p, f) for p, f in FIGURES), m.storyboard()]


# Under linear percentiles, the default of spec/semantics.md.
QUESTIONS = (
    Question(
        "all six figures and the storyboard at once",
        lambda m: [*(m.figure(p, f) for p, f in FIGURES), m.storyboard()],
    ),
    # Z3's minimal unsatisfiable core of the question above: storyboard and utilization
    # play no part, so the six figures alone are impossible too.
    Question(
        "both iteration counts and both P95 waits (no storyboard, no utilization)",
        lambda m: [m.figure(p, f) for p, f in FIGURES if f != "utilization"],
    ),
    Question(
        "static P95 wait 19.4 or less, with both iteration counts and continuous P95 wait",
        lambda m: [
            m.figure("static", "iterations"),
            m.figure("continuous", "iterations"),
            m.figure("continuous", "p95_wait"),
            m.schedules["static"].p95_times_5 <= 5 * PUBLISHED["static"].p95_wait + 2,
        ],
    ),
)


def ask(question: Question, rlimit: int = DEFAULT.teaching) -> Answer:
    """Whether the question's constraints can hold together; "unsat" is a proof they cannot.
    ``rlimit``: Z3 resource units for the check."""
    model = TeachingModel(method=question.method)
    limit(model.solver, rlimit)
    model.solver.add(*question.constraints(model))
    done = check(model.solver)
    return Answer(question.text, str(done.result), done.seconds, done.units)


def conventions(
    rlimit: int = DEFAULT.teaching, skip: tuple[PercentileMethod, ...] = ()
) -> list[tuple[tuple[PercentileMethod, ...], Answer]]:
    """For each of numpy's percentile methods: can all six figures and the storyboard hold?

    Methods that weigh the two largest of 9 waits alike are one question; ``skip`` leaves out
    methods already asked about.
    """
    groups: dict[tuple[object, ...], list[PercentileMethod]] = {}
    for method in PERCENTILE_METHODS:
        if method not in skip:
            groups.setdefault(p95_weights(method), []).append(method)
    answers = []
    for methods in groups.values():
        text = f"all six figures and the storyboard, P95 by {' = '.join(methods)}"
        answers.append((tuple(methods), ask(Question(text, everything, methods[0]), rlimit)))
    return answers


def closest(
    rlimit: int = DEFAULT.teaching, method: PercentileMethod = LESSON_PERCENTILE_METHOD
) -> Workload | None:
    """The storyboard and all six figures exactly, P95 waits read under ``method``.

    Among the many such workloads, :data:`PREFERENCES` are added one by one, each kept only if
    the system stays satisfiable, so the result reads like the lesson's "mixed" workload.
    """
    model = TeachingModel(method=method)
    limit(model.solver, rlimit)  # each check, not the whole search
    model.solver.add(*everything(model))
    if model.solver.check() != z3.sat:
        return None
    for preference in PREFERENCES:
        model.solver.push()
        model.solver.add(preference(model))
        if model.solver.check() == z3.sat:
            continue
        model.solver.pop()
        model.solver.check()
    solution = model.solver.model()
    arrivals = [solution.eval(x).as_long() for x in model.arrival]
    outputs = [solution.eval(x).as_long() for x in model.output]
    return build_workload(arrivals, outputs, method)


def _p95_exact(m: TeachingModel, policy: str) -> Any:
    scaled, scale = m.p95_scaled(policy)
    return scaled == PUBLISHED[policy].p95_wait * scale


PREFERENCES: tuple[Callable[[TeachingModel], Any], ...] = (
    # both P95 waits exactly as published, not just rounding to them
    lambda m: z3.And([_p95_exact(m, p) for p in ("static", "continuous")]),
    # utilizations within a quarter point of the published percentages, not at a rounding edge
    lambda m: z3.And([m.utilization_within(p, 0.25) for p in ("static", "continuous")]),
    # no trivial requests: every output at least 8 tokens
    lambda m: z3.And([o >= 8 for o in m.output]),
    # arrivals spread out: no two of d..i at the same time
    lambda m: z3.And([m.arrival[k] < m.arrival[k + 1] for k in range(3, len(NAMES) - 1)]),
)


def build_workload(
    arrivals: Sequence[int],
    outputs: Sequence[int],
    method: PercentileMethod = LESSON_PERCENTILE_METHOD,
) -> Workload:
    """Attach prompts: a, b, c hold 3 + 4 + 4 = 11 pages in iteration 1; the rest are mixed."""
    prompts = [40, 60, 63, 120, 24, 180, 8, 96, 150]
    first_pages = sum(pages_for(p + 1, PAGE_SIZE) for p in prompts[:3])
    assert first_pages == STORYBOARD_FIRST_BATCH_PAGES
    requests = tuple(
        Request(id=x, arrival=a, prompt_tokens=p, output_tokens=o)
        for x, a, p, o in zip(NAMES, arrivals, prompts, outputs, strict=True)
    )
    return Workload(
        name="teaching",
        limits=Limits(batch_limit=BATCH_LIMIT, page_size=PAGE_SIZE, pool_pages=POOL_PAGES),
        requests=requests,
        description="The lesson's 9-request trace, reconstructed by `kvsched reconstruct`: "
        "see spec/traces/README.md.",
        percentile_method=method,
    )


def verify(workload: Workload) -> dict[str, dict[str, float]]:
    """Replay with the reference; the figures as the spec computes them, per policy."""
    figures = {}
    for policy, scheduler in (("static", StaticScheduler), ("continuous", ContinuousScheduler)):
        metrics = compute_metrics(workload, run(workload, scheduler).events)
        figures[policy] = {
            "iterations": metrics.iterations,
            "utilization": metrics.utilization,
            "p95_wait": metrics.p95_wait,
        }
    return figures
