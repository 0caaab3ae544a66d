"""Reconstructing the lesson's teaching trace with Z3 (spec/traces/README.md).

The lesson published six figures and a storyboard for a 9-request workload it did not publish.
This module writes the lesson's two schedules as constraints over the unknown arrivals and output
lengths, and asks Z3 three questions:

1. Can every figure and the storyboard hold at once? Under spec/semantics.md, no: UNSAT is a
   proof over all workloads (static batching's 116 iterations bound every arrival and output
   length, so no bound of ours hides a solution). :data:`QUESTIONS` narrows down why.
2. The closest workload: the storyboard and five figures exactly, and static P95 wait at the
   nearest value that misses the published one.

The encoding assumes a pool large enough never to bind (the teaching trace's pool is chosen so,
and :func:`verify` replays the result with the reference to confirm every figure), FCFS in
declared order (arrivals sorted: requests are interchangeable except for their names), and the
closed forms of sections 3 and 5 of the semantics:

- continuous: request k starts at the first iteration ``s >= max(arrival + 1, s[k-1])`` in which
  fewer than ``batch_limit`` earlier requests are still active (``finish >= s``);
- static: k joins the batch of k - 1 if that batch has a free place and k had arrived when it
  formed; otherwise k opens the next batch the iteration after the previous one drains;
- a request started in iteration s finishes in ``s + output - 1``.

``tests/test_teaching_trace.py`` cross-checks these closed forms against the reference engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.engine import run
from kvsched.reference.metrics import compute_metrics
from kvsched.reference.static import StaticScheduler
from kvsched.spec.teaching import (
    PUBLISHED,
    STORYBOARD_A_FINISHES,
    STORYBOARD_D_JOINS_CONTINUOUS,
    STORYBOARD_FIRST_BATCH_PAGES,
)
from kvsched.spec.workload import Limits, Request, Workload, pages_for

NAMES = "abcdefghi"
BATCH_LIMIT = 3
PAGE_SIZE = 16
POOL_PAGES = 64  # prompts <= 180 and outputs <= 116: any three requests fit, the pool never binds

# Percentile rank for P95 of 9 values: r = 8 * 0.95 = 7.6, so P95 = 0.4 v[7] + 0.6 v[8] and
# 5 * P95 = 2 * second_largest + 3 * largest, an integer. The lesson rounds to whole iterations.
P95_TIMES_5 = {
    policy: range(5 * f.p95_wait - 2, 5 * f.p95_wait + 3) for policy, f in PUBLISHED.items()
}


@dataclass(frozen=True)
class Answer:
    question: str
    verdict: str  # "sat", "unsat" or "unknown"
    seconds: float


@dataclass
class _Schedule:
    starts: list[Any]
    finishes: list[Any]
    iterations: Any
    busy_iterations: Any
    p95_times_5: Any


class TeachingModel:
    """The constraint system: unknown arrivals and outputs, both schedules, the figures."""

    def __init__(self, seed: int = 0) -> None:
        # A context of its own, so earlier queries in the process cannot change the answer.
        self.ctx = z3.Context()
        self.solver = z3.Solver(ctx=self.ctx)
        self.solver.set("random_seed", seed)
        n = len(NAMES)
        self.arrival = [z3.Int(f"arrival_{x}", self.ctx) for x in NAMES]
        self.output = [z3.Int(f"output_{x}", self.ctx) for x in NAMES]
        for k in range(n):
            self.solver.add(self.arrival[k] >= 0, self.output[k] >= 1)
            if k:
                self.solver.add(self.arrival[k - 1] <= self.arrival[k])
        self.schedules = {
            "static": self._static_schedule(),
            "continuous": self._continuous_schedule(),
        }

    def _continuous_schedule(self) -> _Schedule:
        starts = [z3.Int(f"continuous_start_{x}", self.ctx) for x in NAMES]
        finishes = [starts[k] + self.output[k] - 1 for k in range(len(NAMES))]
        for k in range(len(NAMES)):
            earliest = self.arrival[k] + 1 if k == 0 else _max(self.arrival[k] + 1, starts[k - 1])

            def busy_slots(t: Any, k: int = k) -> Any:
                return z3.Sum(
                    [z3.If(finishes[j] >= t, 1, 0) for j in range(k)] + [z3.IntVal(0, self.ctx)]
                )

            self.solver.add(starts[k] >= earliest, busy_slots(starts[k]) < BATCH_LIMIT)
            self.solver.add(z3.Or(starts[k] == earliest, busy_slots(starts[k] - 1) >= BATCH_LIMIT))
        return self._measure("continuous", starts, finishes)

    def _static_schedule(self) -> _Schedule:
        n = len(NAMES)
        starts = [z3.Int(f"static_start_{x}", self.ctx) for x in NAMES]
        finishes = [starts[k] + self.output[k] - 1 for k in range(n)]
        place = [z3.Int(f"static_place_{x}", self.ctx) for x in NAMES]  # position within its batch
        drains = [
            z3.Int(f"static_drain_{x}", self.ctx) for x in NAMES
        ]  # last finish of its batch so far
        self.solver.add(starts[0] == self.arrival[0] + 1, place[0] == 0, drains[0] == finishes[0])
        for k in range(1, n):
            joins = z3.And(place[k - 1] < BATCH_LIMIT - 1, self.arrival[k] < starts[k - 1])
            self.solver.add(
                z3.If(
                    joins,
                    z3.And(
                        starts[k] == starts[k - 1],
                        place[k] == place[k - 1] + 1,
                        drains[k] == _max(drains[k - 1], finishes[k]),
                    ),
                    z3.And(
                        starts[k] == _max(self.arrival[k] + 1, drains[k - 1] + 1),
                        place[k] == 0,
                        drains[k] == finishes[k],
                    ),
                )
            )
        return self._measure("static", starts, finishes)

    def _measure(self, policy: str, starts: list[Any], finishes: list[Any]) -> _Schedule:
        # Busy iterations: starts are non-decreasing, so request k adds the part of
        # [start, finish] beyond every earlier finish.
        covered: list[Any] = []
        last_finish: Any = z3.IntVal(0, self.ctx)
        for k in range(len(NAMES)):
            covered.append(_max(0, finishes[k] - _max(starts[k] - 1, last_finish)))
            last_finish = _max(last_finish, finishes[k])
        waits = [starts[k] - 1 - self.arrival[k] for k in range(len(NAMES))]
        largest, second = (
            z3.Int(f"{policy}_max_wait", self.ctx),
            z3.Int(f"{policy}_second_wait", self.ctx),
        )
        self.solver.add(z3.And([largest >= w for w in waits]), z3.Or([largest == w for w in waits]))
        self.solver.add(z3.Sum([z3.If(w >= second, 1, 0) for w in waits]) >= 2)
        self.solver.add(z3.Sum([z3.If(w > second, 1, 0) for w in waits]) <= 1)
        return _Schedule(starts, finishes, last_finish, z3.Sum(covered), 2 * second + 3 * largest)

    def figure(self, policy: str, name: str) -> Any:
        """The constraint that one published figure holds, as the lesson rounds it."""
        published, schedule = PUBLISHED[policy], self.schedules[policy]
        tokens = z3.Sum(self.output)
        if name == "iterations":
            return schedule.iterations == published.iterations
        if name == "utilization":
            # round(100 * tokens / (3 * busy)) == percent, kept in integers
            slots = BATCH_LIMIT * schedule.busy_iterations
            percent = published.utilization_percent
            return z3.And(
                200 * tokens >= (2 * percent - 1) * slots, 200 * tokens < (2 * percent + 1) * slots
            )
        if name == "p95_wait":
            allowed = P95_TIMES_5[policy]
            return z3.And(
                schedule.p95_times_5 >= allowed.start, schedule.p95_times_5 < allowed.stop
            )
        raise ValueError(f"unknown figure {name!r}")

    def utilization_within(self, policy: str, points: float) -> Any:
        """Utilization within ``points`` percentage points of the published figure."""
        slots = BATCH_LIMIT * self.schedules[policy].busy_iterations
        low = z3.RealVal(PUBLISHED[policy].utilization_percent - points, self.ctx) / 100
        high = z3.RealVal(PUBLISHED[policy].utilization_percent + points, self.ctx) / 100
        tokens = z3.ToReal(z3.Sum(self.output))
        return z3.And(tokens >= low * z3.ToReal(slots), tokens <= high * z3.ToReal(slots))

    def storyboard(self) -> Any:
        """a, b, c form batch one; a finishes at 14 while d waits; d joins at 15."""
        a, d = 0, 3
        static, continuous = self.schedules["static"], self.schedules["continuous"]
        return z3.And(
            self.arrival[0] == 0,
            self.arrival[1] == 0,
            self.arrival[2] == 0,
            self.arrival[d] < STORYBOARD_A_FINISHES,  # d has arrived when a finishes
            self.output[a] == STORYBOARD_A_FINISHES,
            # b and c outlive a: under static a's slot then idles, under continuous d takes it
            self.output[1] > STORYBOARD_A_FINISHES,
            self.output[2] > STORYBOARD_A_FINISHES,
            static.starts[d] > STORYBOARD_A_FINISHES,
            continuous.starts[d] == STORYBOARD_D_JOINS_CONTINUOUS,
        )


FIGURES = [
    (p, f) for p in ("static", "continuous") for f in ("iterations", "utilization", "p95_wait")
]


def _max(x: Any, y: Any) -> Any:
    return z3.If(x >= y, x, y)


@dataclass(frozen=True)
class Question:
    text: str
    constraints: Callable[[TeachingModel], list[Any]]


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


def ask(question: Question, timeout_s: float) -> Answer:
    """Whether the question's constraints can hold together; "unsat" is a proof they cannot."""
    model = TeachingModel()
    model.solver.set("timeout", int(timeout_s * 1000))
    model.solver.add(*question.constraints(model))
    started = time.perf_counter()
    verdict = str(model.solver.check())
    return Answer(question.text, verdict, time.perf_counter() - started)


def closest(timeout_s: float = 120.0) -> Workload | None:
    """The storyboard, five figures exactly, and static P95 wait at its nearest miss (19.6).

    Among the many such workloads, :data:`PREFERENCES` are added one by one, each kept only if
    the system stays satisfiable, so the result reads like the lesson's "mixed" workload.
    """
    model = TeachingModel()
    model.solver.set("timeout", int(timeout_s * 1000))
    model.solver.add(model.storyboard())
    model.solver.add(*[model.figure(p, f) for p, f in FIGURES if (p, f) != ("static", "p95_wait")])
    nearest_miss = P95_TIMES_5["static"].stop  # 98, i.e. 19.6, which the lesson would print as 20
    model.solver.add(model.schedules["static"].p95_times_5 == nearest_miss)
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
    return build_workload(arrivals, outputs)


PREFERENCES: tuple[Callable[[TeachingModel], Any], ...] = (
    # continuous P95 exactly as published, not just rounding to it
    lambda m: m.schedules["continuous"].p95_times_5 == 5 * PUBLISHED["continuous"].p95_wait,
    # utilizations within a quarter point of the published percentages, not at a rounding edge
    lambda m: z3.And([m.utilization_within(p, 0.25) for p in ("static", "continuous")]),
    # no trivial requests: every output at least 8 tokens
    lambda m: z3.And([o >= 8 for o in m.output]),
    # arrivals spread out: no two of d..i at the same time
    lambda m: z3.And([m.arrival[k] < m.arrival[k + 1] for k in range(3, len(NAMES) - 1)]),
)


def build_workload(arrivals: Sequence[int], outputs: Sequence[int]) -> Workload:
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
