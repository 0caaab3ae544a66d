"""One scheduler under its deadline, and the ways a check exercises it: a monitored run of a fixed
workload, a Hypothesis search, and the smallest workload that still breaks a found invariant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvsched.checks.judge.door import judged_run
from kvsched.checks.monitor.coverage import Coverage, reached
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.search.shrink import (
    DEFAULT_BUDGET,
    Spent,
    horizon,
    shrink_workload,
    violation,
)
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.verdict.report import FailingWorkload
from kvsched.reference.efficiency import measure
from kvsched.reference.engine import run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.workload import Workload

if TYPE_CHECKING:
    from kvsched.checks.judge.options import CheckOptions
    from kvsched.checks.search.explore import SearchResult


@dataclass(frozen=True)
class Trial:
    """One scheduler, already under its deadline, and the ways to exercise it."""

    factory: SchedulerFactory
    policy: str
    properties: TargetProperties | None
    options: CheckOptions
    deadline: Deadline
    climb: bool = True
    """Whether the search steers with Hypothesis's targeting (``explore.search``'s ``climb``)."""
    rerun: bool = True
    """Whether the search judges again a workload it judged clean (``explore.search``'s)."""
    draws: Draws | None = None
    """Shared by the trials of one target under each policy: the first clean search's
    workloads, which a later one judges without drawing them again (:meth:`search`)."""

    def measured(
        self, workload: Workload
    ) -> tuple[Finding | None, tuple[tuple[str, int], ...], Excused, Coverage]:
        """Run ``workload`` through the engine and the monitor: the first finding, if any, the
        run's efficiency figures (EFF-1..EFF-4), what the declarations excused in it and what
        it reached."""
        self.deadline.context = f"workload '{workload.name}' ({self.policy or 'no'} policy)"
        judged = judged_run(workload, self.factory, self.policy, self.properties)
        figures = measure(workload, judged.run.events, self.properties).by_id()
        return judged.finding, tuple(figures.items()), judged.excused, reached(judged.run)

    def search(self, invariant: str | None = None) -> SearchResult:
        """Hypothesis's examples under this trial's policy; for ``invariant``, a smaller witness
        of it. With :attr:`draws` holding another policy's clean search, its workloads are
        judged first, undrawn (``explore.replay``: the very workloads this search would draw),
        and the search runs only if one of them breaks an invariant here, to find and shrink
        it as before."""
        # Hypothesis is imported only when it is used.
        from kvsched.checks.search.explore import replay, search
        from kvsched.checks.search.strategies import workloads

        self.deadline.context = f"a workload Hypothesis generated ({self.policy or 'no'} policy)"
        options = self.options
        # A search for a smaller witness may stop at any time: the violation is known.
        minimum = options.minimum_examples if invariant is None else 0
        shared = self.draws if invariant is None else None
        if shared is not None and shared.result is not None:
            replayed = replay(
                self.factory, self.policy, shared.result, properties=self.properties,
                until=options.until, minimum=minimum,
            )  # fmt: skip
            if replayed is not None:
                return replayed
        result = search(
            self.factory,
            self.policy,
            options.profile,
            options.max_examples,
            properties=self.properties,
            invariant=invariant,
            # Looking for a smaller witness of a known violation: small workloads only.
            strategy=None if invariant is None else workloads(),
            seed=options.seed,
            until=options.until,
            minimum=minimum,
            climb=self.climb,
            rerun=self.rerun,
        )
        if shared is not None and shared.result is None and result.drawn:
            shared.result = result
        return result

    def violation(
        self, workload: Workload, invariant: str, iterations: int | None = None
    ) -> tuple[Finding | None, int]:
        """The first finding of a run of ``workload`` if it violates ``invariant`` anywhere in
        its first ``iterations`` (all, if None), and the iterations the run took."""
        self.deadline.context = f"workload '{workload.name}' ({self.policy or 'no'} policy)"
        if self.properties is not None and self.properties.unservable(workload):
            return None, 0  # a pool the target's reserved pages leave too small: no witness
        result = run(
            workload,
            self.factory,
            policy=self.policy,
            properties=self.properties,
            max_iterations=iterations,
        )
        return violation(result, invariant, self.properties), len(result.events)

    def minimise(
        self, workload: Workload, finding: Finding, source: str
    ) -> tuple[FailingWorkload, Finding]:
        """The smallest workload found breaking ``finding.invariant``, and the earliest violation
        on it, which names the bug (shrink first, then name).

        The shrink keeps the violation found somewhere in every candidate (never drifting into
        a workload that fails for another reason only); on the smallest, the first violation may
        come under another rule, which is what a reader should fix first. The workload is then
        shrunk again for that first violation, so that what is shown is observed on what is
        shown. Hypothesis is asked for a smaller witness only when the shrink left more than a
        handful of requests."""
        given = workload is self.options.workload
        saved = self.options.workload_file if given else ""
        if self.deadline.expired:
            # After a hang, each shrinking step could hang again: shown where it happened.
            return FailingWorkload(workload, source, saved_to=saved), finding
        spent = calls = 0

        def breaking(found: Finding, first: bool) -> Callable[[Workload], bool]:
            invariant, iterations = found.invariant, horizon(found)

            def still_fails(candidate: Workload) -> bool:
                nonlocal spent, calls
                if calls >= SHRINK_CALLS:
                    raise Spent
                spent += 1
                seen, ran = self.violation(candidate, invariant, iterations)
                calls += len(candidate.requests) + 2 * ran
                return seen is not None and (not first or seen.invariant == invariant)

            return still_fails

        smallest = shrink_workload(workload, breaking(finding, first=False))
        named = self.measured(smallest)[0]
        if named is None:
            return FailingWorkload(workload, source, saved_to=saved), finding  # not deterministic
        if named.invariant != finding.invariant and finding.invariant not in {
            later.invariant for later in named.followed_by
        }:
            # The earliest violation no longer leads to the one found: the target now answers
            # this workload otherwise (it is not deterministic, or it has used up something of
            # its own, such as threads). The witness stays the one the violation was found on.
            return FailingWorkload(workload, source, saved_to=saved), finding
        if named.invariant != finding.invariant:
            left = max(0, DEFAULT_BUDGET - spent)
            smallest = shrink_workload(smallest, breaking(named, first=True), left)
        invariant = named.invariant
        if smallest == workload and given and invariant == finding.invariant:
            return FailingWorkload(workload, source, saved_to=saved), finding
        found_by = f"{source}, shrunk" if smallest != workload else source
        blob = ""
        if (
            self.options.hypothesis
            and len(smallest.requests) > HANDFUL
            and not self.deadline.expired
        ):
            other = self.search(invariant).counterexample
            if other is not None and _size(other.workload) < _size(smallest):
                # What the user ran shows the violation first: named first, then who made it small.
                found_by = f"{source}, made smaller by Hypothesis"
                smallest, blob = other.workload, other.reproduce
        small_finding = self.measured(smallest)[0]
        if small_finding is None or small_finding.invariant != invariant:
            return FailingWorkload(workload, source), finding  # the target is not deterministic
        earlier = (
            ""
            if invariant == finding.invariant
            else f" Found on {source} as {finding.invariant} in iteration {finding.iteration}; "
            f"on this smaller workload {invariant} comes first."
        )
        description = (
            f"Smallest workload found from {source}: under {self.policy or 'its own'} policy "
            f"the target breaks {invariant}.{earlier} {small_finding.message}"
        )
        smallest = replace(smallest, name="counterexample", description=description)
        return FailingWorkload(smallest, found_by, blob), small_finding


@dataclass
class Draws:
    """What the trials of one target under each policy share: the first search that drew
    its workloads and passed them all, judging each once (``explore.SearchResult.drawn``).

    Share it only between trials whose searches draw alike: the same options (profile, seed,
    examples), ``climb`` and ``rerun`` off; then a later policy's search that passes would draw
    the same workloads, and judging them undrawn gives its result (``explore.replay``)."""

    result: SearchResult | None = None


SHRINK_CALLS = 300_000
"""Calls into the target one minimisation may make over all its candidates: one
``add_request`` per request and a ``schedule`` and an ``update_from_output`` per iteration, which
is what a run costs, not the candidates ``shrink.DEFAULT_BUDGET`` counts. The planted bugs of
tests/quality/test_minimal_witnesses.py shrink in under 30,000 (1 s of CPU); a leak after 5,000
finished requests, found in the long run of 10,000, took 110 s of CPU on the shrinker before
(400 runs of thousands of requests) and stops at this cap with the 5,001 requests it needs. A
count, not a time, so every machine stops at the same witness."""


HANDFUL = 4
"""Requests a shrunk witness may keep before Hypothesis is asked for a smaller one: a bug that
shows on one or two requests is shown on at most this many."""


def _size(workload: Workload) -> tuple[int, int]:
    return len(workload.requests), sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
