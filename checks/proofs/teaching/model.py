"""The lesson's two schedules as Z3 constraints over unknown arrivals and output lengths.

Used by :mod:`.reconstruct` to reconstruct the teaching trace (spec/traces/README.md). The
encoding assumes a pool large enough never to bind, FCFS in declared order (arrivals sorted:
requests are interchangeable except for their names), and the closed forms of sections 3 and 5
of the semantics:

- continuous: request k starts at the first iteration ``s >= max(arrival + 1, s[k-1])`` in which
  fewer than ``batch_limit`` earlier requests are still active (``finish >= s``);
- static: k joins the batch of k - 1 if that batch has a free place and k had arrived when it
  formed; otherwise k opens the next batch the iteration after the previous one drains;
- a request started in iteration s finishes in ``s + output - 1``.

``tests/nocover/test_teaching_trace.py`` cross-checks these closed forms against the reference
engine. They hold only for that shape:
:func:`~kvsched.checks.proofs.lesson_scope.teaching_scope` says whether a workload has it, and
:meth:`TeachingModel.pin` refuses one that does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from math import lcm
from typing import Any

import numpy as np
import z3

from kvsched.checks.proofs.lesson_scope import (
    TEACHING_BATCH_LIMIT,
    TEACHING_REQUESTS,
    teaching_scope,
)
from kvsched.spec.teaching import (
    PUBLISHED,
    STORYBOARD_A_FINISHES,
    STORYBOARD_D_JOINS_CONTINUOUS,
)
from kvsched.spec.vocabulary import DEFAULT_PERCENTILE_METHOD, PercentileMethod
from kvsched.spec.workload import Workload

NAMES = "abcdefghi"[:TEACHING_REQUESTS]
BATCH_LIMIT = TEACHING_BATCH_LIMIT

# Percentile rank for P95 of 9 values under linear: r = 8 * 0.95 = 7.6, so P95 = 0.4 v[7] +
# 0.6 v[8] and 5 * P95 = 2 * second_largest + 3 * largest, an integer. The lesson rounds to whole
# iterations.
P95_TIMES_5 = {
    policy: range(5 * f.p95_wait - 2, 5 * f.p95_wait + 3) for policy, f in PUBLISHED.items()
}


@cache
def p95_weights(method: PercentileMethod) -> tuple[Fraction, Fraction]:
    """P95 of 9 values under ``method`` as ``w2 x second-largest + w1 x largest``, exactly.

    For a fixed count, every numpy method is a fixed weighted sum of the sorted values, so the
    weights are read off numpy itself on step vectors (0...0 1...1); a method that also weighed
    a smaller value would need more of the model and is refused.
    """
    n = len(NAMES)
    steps = [
        Fraction(
            float(np.percentile([0] * k + [1] * (n - k), 95, method=method))
        ).limit_denominator(1000)
        for k in range(n + 1)
    ]
    weights = [steps[k] - steps[k + 1] for k in range(n)]
    if any(weights[: n - 2]) or sum(weights) != 1:
        raise ValueError(f"P95 of {n} values under {method!r} is not a mix of the two largest")
    return weights[n - 2], weights[n - 1]


@dataclass
class _Schedule:
    starts: list[Any]
    finishes: list[Any]
    iterations: Any
    busy_iterations: Any
    second_wait: Any
    max_wait: Any

    @property
    def p95_times_5(self) -> Any:
        """5 x P95 wait under linear, an integer (see :data:`P95_TIMES_5`)."""
        return 2 * self.second_wait + 3 * self.max_wait


class TeachingModel:
    """The constraint system: unknown arrivals and outputs, both schedules, the figures.

    ``method`` is the percentile convention the published P95 waits are read under (7.4).
    """

    def __init__(self, seed: int = 0, method: PercentileMethod = DEFAULT_PERCENTILE_METHOD) -> None:
        self.method = method
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

    def pin(self, workload: Workload) -> None:
        """Fix the unknowns to ``workload``'s arrivals and outputs; OutOfScope if the closed forms
        do not describe it (:func:`~kvsched.checks.proofs.lesson_scope.teaching_scope`)."""
        teaching_scope(workload).require("the teaching model")
        for k, request in enumerate(workload.requests):
            self.solver.add(self.arrival[k] == request.arrival)
            self.solver.add(self.output[k] == request.output_tokens)

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
        return _Schedule(starts, finishes, last_finish, z3.Sum(covered), second, largest)

    def p95_scaled(self, policy: str) -> tuple[Any, int]:
        """``(scale x P95 wait, scale)`` under the model's method, in integers."""
        second_weight, largest_weight = p95_weights(self.method)
        scale = lcm(second_weight.denominator, largest_weight.denominator)
        schedule = self.schedules[policy]
        scaled = (
            int(second_weight * scale) * schedule.second_wait
            + int(largest_weight * scale) * schedule.max_wait
        )
        return scaled, scale

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
            # round(P95) == published: published - 1/2 <= P95 < published + 1/2, in integers
            scaled, scale = self.p95_scaled(policy)
            return z3.And(
                2 * scaled >= (2 * published.p95_wait - 1) * scale,
                2 * scaled < (2 * published.p95_wait + 1) * scale,
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
