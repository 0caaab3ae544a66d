"""Search for the smallest workload on which a scheduler breaks an invariant.

:func:`search` runs the target through the reference engine on workloads drawn by
:func:`.strategies.workloads` and judges every run with the runtime monitor. When the
monitor reports a finding, Hypothesis shrinks the workload while the target keeps breaking *the
same invariant*: the id of the first finding is locked, and a smaller workload that breaks a
different invariant counts as passing. Without the lock, shrinking slips from, say, a page leak
(PAGE-3) found on a big workload to whatever small workload breaks something else, and the user
is shown the wrong bug.

It aims at the corners where real engines broke (:mod:`.corners`): targets on preemptions, full
prefix hits and admissions that leave no page free, and the known boundary shapes first, as
explicit examples. One example in :data:`.strategies.FAR_SHARE` is a far workload (block tables
of hundreds to thousands of pages, :func:`.strategies.far_workloads`), drawn by a test of its
own after the others, so that share is certain whatever Hypothesis's generation and targeting
make of a single strategy. What Hypothesis shrinks a failure to is shrunk again request by request
(:func:`.shrink.smallest_failing`): a request Hypothesis cannot drop without redrawing the
others stays in its minimum.

The result is a :class:`Counterexample`: the minimal workload (save it with
:meth:`Counterexample.save` and ``kvsched replay`` or ``kvsched check --workload`` replays it
exactly, since the engine is deterministic), the finding, the number of examples tried, and
Hypothesis's ``@reproduce_failure`` line, which :func:`search` accepts back as ``reproduce=``.

The target runs in this process; a target that hangs is the caller's to time out (the check
command does). A target that raises or answers outside the protocol is a PROTO-1 finding like any
other, never an error of this module.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from hypothesis import example, given, reproduce_failure, settings
from hypothesis import strategies as st
from hypothesis.errors import DidNotReproduce, FlakyFailure, InvalidArgument
from hypothesis.stateful import run_state_machine_as_test

from kvsched.checks import progress
from kvsched.checks.monitor.coverage import Coverage, reached
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.search import profiles, runs
from kvsched.checks.search.corners import BOUNDARY_SHAPES, aim, targeted
from kvsched.checks.search.counterexample import (
    Counterexample,
    StatefulCounterexample,
    parse_reproduce,
    reproduce_line,
)
from kvsched.checks.search.harness import first_of, profile_name, search_settings
from kvsched.checks.search.profiles import use_kvsched_cache
from kvsched.checks.search.shrink import smallest_failing
from kvsched.checks.search.stateful import InvariantViolated, StatefulFailure, state_machine
from kvsched.checks.search.strategies import FAR_SHARE, far_workloads, search_workloads
from kvsched.reference.engine import run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.vocabulary import DEFAULT_PROFILE
from kvsched.spec.workload import Limits, Request, Workload

if sys.version_info < (3, 11):  # Hypothesis depends on the backport there
    from exceptiongroup import BaseExceptionGroup

__all__ = [
    "Counterexample",
    "SearchResult",
    "StatefulCounterexample",
    "StatefulResult",
    "find_counterexample",
    "replay",
    "run_stateful",
    "search",
]


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one search: how many examples ran, and the counterexample if any."""

    policy: str
    profile: str
    examples: int
    """Examples run in all: for a clean search, "Hypothesis, N examples" in the check table."""
    counterexample: Counterexample | None
    excused: Excused = field(default_factory=Excused)
    """What the target's declarations excused over every example run."""
    budget_spent: bool = False  # the time budget ended it before all the profile's examples
    coverage: Coverage = field(default_factory=Coverage)
    """What the examples' runs reached (counted for the examples judged, to the violation)."""
    drawn: tuple[Workload, ...] = ()
    """A search that neither climbed nor judged a workload twice and passed them all, to the
    last example: the workloads it judged, in its order (:func:`replay` judges them under
    another policy)."""

    @property
    def clean(self) -> bool:
        return self.counterexample is None


@dataclass(frozen=True)
class StatefulResult:
    """The outcome of :func:`run_stateful`: state machines run, and the failure if any."""

    policy: str
    profile: str
    runs: int
    failure: StatefulCounterexample | None

    @property
    def clean(self) -> bool:
        return self.failure is None


class _Violation(Exception):
    """Raised inside the Hypothesis test so that it shrinks; carries what the monitor found.
    ``found`` is the violation Hypothesis raised, whose reproduce line this one keeps."""

    def __init__(
        self, workload: Workload, finding: Finding, found: _Violation | None = None
    ) -> None:
        super().__init__(f"{finding.invariant}: {finding.message}")
        self.workload = workload
        self.finding = finding
        if found is not None:
            self.__notes__ = getattr(found, "__notes__", [])


def search(
    factory: SchedulerFactory,
    policy: str,
    profile: str = DEFAULT_PROFILE,
    max_examples: int | None = None,
    *,
    properties: TargetProperties | None = None,
    invariant: str | None = None,
    strategy: st.SearchStrategy[Workload] | None = None,
    reproduce: str | None = None,
    seed: int | None = None,
    until: float | None = None,
    minimum: int = 0,
    climb: bool = True,
    rerun: bool = True,
) -> SearchResult:
    """Run ``factory``'s scheduler on generated workloads until one breaks an invariant.

    ``policy`` is the target's declared policy (it selects the invariants that apply);
    ``profile`` one of :data:`kvsched.spec.vocabulary.PROFILE_NAMES`, whose example count
    ``max_examples`` overrides. ``invariant`` restricts the search to one id from the start.
    ``strategy`` replaces the default workloads; a ``reproduce`` line only replays on the
    strategy it was found with. ``reproduce`` reruns that one test case: the result is clean if
    the target no longer fails it. Raises ``ValueError`` for an unknown profile or a malformed or
    foreign ``reproduce`` line; exceptions of kvsched itself propagate unchanged.
    ``seed`` and ``until`` as in :func:`.profiles.seeded` and :func:`.runs.spend`; the
    budget stops no search before ``minimum`` examples have run, so a target that spends the
    time in its own calls cannot starve the search into a clean result: its slowness is charged
    to it, as the check's overall budget ending the run (an inconclusive verdict).
    ``climb``: steer the search with Hypothesis's targeting (:func:`.corners.aim`); without it
    the search has no target phase and spends its examples on fresh draws. ``rerun``: judge
    again a workload the search already judged clean (Hypothesis draws some twice: a mutation,
    or choices that differ only past what the size budget keeps); without it each is judged
    once, which trusts the target to answer a workload the same way every time: one drawn
    again counts as an example, as it does when it is run, and takes its first run's verdict.
    """
    # The known boundary shapes come first in the default search, and in a search for a smaller
    # witness of a known violation, whatever workloads it draws: each is a witness of 2 or 3
    # requests, and a drawn one is found only by luck.
    directed = strategy is None or invariant is not None
    shapes = BOUNDARY_SHAPES if directed and reproduce is None else ()
    config = search_settings(profile, max_examples, len(shapes))
    use_kvsched_cache()
    examples = 0
    locked = invariant
    excused = Excused()
    coverage = Coverage()
    wanted = f" breaking {invariant}" if invariant else ""
    progress.phase(f"{policy or 'declared'}: Hypothesis examples{wanted}", config.max_examples)
    failed = False
    corners = targeted(properties) if climb else None

    def judge(workload: Workload) -> None:
        nonlocal examples, locked, excused, failed, coverage
        runs.spend(until, failed or examples < minimum)
        examples += 1
        progress.advance(examples)
        workload = _beside_reserved(workload, properties)
        result = run(workload, factory, policy=policy, properties=properties)
        finding, seen = watch_run(result, properties)
        excused += seen
        coverage += reached(result)
        reserved = len(properties.reserved_pages) if properties is not None else 0
        aim(result, workload.limits.pool_pages - reserved, corners)
        if finding is None:
            return
        if locked is None:
            locked = finding.invariant
            progress.failed(locked, f"{finding.where} of a workload Hypothesis drew")
            progress.phase(f"{policy or 'declared'}: Hypothesis shrinking a {locked} workload")
        if finding.invariant == locked:
            failed = True
            raise _Violation(workload, finding)

    passed = _Judged()

    def judge_once(workload: Workload) -> None:
        """:func:`judge`, but a workload that passed it before takes that verdict, unrun. A
        test function of its own: Hypothesis seeds a derandomized search from the test's
        source, and a class's search keeps drawing what it drew."""
        nonlocal examples
        key = (workload.limits, workload.requests)
        if key in passed:
            examples += 1
            progress.advance(examples)
            return
        judge(workload)
        passed.add(key)  # judge returned: no violation, or not of the invariant locked for good

    judged = False  # a reproduce line made a workload of some share's strategy
    for drawn, count in _shares(strategy, profile, config.max_examples):
        tested = judge if rerun else judge_once
        test = settings(config, max_examples=count)(given(drawn)(tested))
        if reproduce is not None:
            test = reproduce_failure(*parse_reproduce(reproduce))(test)
        for shape in reversed(shapes):  # decorators apply bottom-up: run in order
            test = example(shape)(test)
        shapes = ()  # run first, once
        before = examples
        try:
            profiles.seeded(test, seed)()
        except runs.BudgetSpent:
            return SearchResult(
                policy, profile, examples, None, excused, budget_spent=True, coverage=coverage
            )
        except (_Violation, FlakyFailure, BaseExceptionGroup) as failure:
            violation = first_of(failure, _Violation)
            if violation is None:
                raise
            # An explicit example's failure is not replayed by Hypothesis: the shrink replays it.
            found = smallest_failing(
                violation.workload, violation.finding.invariant, factory, policy, properties
            )
            steady = found is not None and not isinstance(failure, FlakyFailure)
            if found is not None:
                violation = _Violation(*found, violation)
            counterexample = _counterexample(violation, policy, examples, deterministic=steady)
            return SearchResult(
                policy, profile, examples, counterexample, excused, coverage=coverage
            )
        except DidNotReproduce:
            # Judged and passed: the target was fixed, or the line was recorded on the other
            # share's strategy and its choices made some other workload of this one; that share
            # replays it next. Never judged: its choices make no workload of this strategy.
            judged = judged or examples > before
        except InvalidArgument as error:
            if reproduce is None:
                raise
            raise ValueError(f"cannot replay {reproduce!r}: {error}") from None
    if reproduce is not None and not judged:
        raise ValueError(
            f"cannot replay {reproduce!r}: it was recorded with a different workload strategy"
        )
    # Only a search whose draws no run steered is one another policy's would draw alike.
    once = () if rerun or climb else tuple(Workload("hypothesis", *key) for key in passed)
    return SearchResult(policy, profile, examples, None, excused, coverage=coverage, drawn=once)


class _Judged(dict[tuple[Limits, tuple[Request, ...]], None]):
    """The workloads a search judged once and found clean, as ``(limits, requests)``: a set
    that keeps the order they were judged in, for :attr:`SearchResult.drawn`."""

    def add(self, key: tuple[Limits, tuple[Request, ...]]) -> None:
        self[key] = None


def replay(
    factory: SchedulerFactory,
    policy: str,
    drawn: SearchResult,
    *,
    properties: TargetProperties | None = None,
    until: float | None = None,
    minimum: int = 0,
) -> SearchResult | None:
    """:func:`search` under ``policy`` of what it would draw, run on the workloads another
    policy's search drew (``drawn.drawn``), without Hypothesis; None at the first workload
    that breaks an invariant under ``policy``, for the caller to search (and shrink) instead.

    The result is the one :func:`search` would return, as long as the search ``drawn`` came
    from ran with the same settings and seed, without climbing, and judged each workload once
    (its ``climb`` and ``rerun`` off): Hypothesis draws from its seed and from what each test
    case did, and without climbing a test case that passes did the same under any policy. So
    a search under a second policy that passes them all draws these workloads again, each from
    the same choices: drawing them is what this saves (for a hosted learner, two fifths to a
    half of its search's CPU in kvsched's process, docs/measurements.md). ``until`` and
    ``minimum`` as in :func:`search`; a workload drawn again counts as an example only in a
    replay run to its end.
    """
    if not drawn.clean or drawn.budget_spent or not drawn.drawn:
        raise ValueError("only a clean search, complete and judging each workload once, replays")
    progress.phase(f"{policy or 'declared'}: Hypothesis examples", drawn.examples)
    excused = Excused()
    coverage = Coverage()
    for examples, workload in enumerate(drawn.drawn):
        try:
            runs.spend(until, examples < minimum)
        except runs.BudgetSpent:
            return SearchResult(
                policy, drawn.profile, examples, None, excused, budget_spent=True,
                coverage=coverage,
            )  # fmt: skip
        progress.advance(examples + 1)
        result = run(
            _beside_reserved(workload, properties), factory, policy=policy, properties=properties
        )
        finding, seen = watch_run(result, properties)
        if finding is not None:
            return None
        excused += seen
        coverage += reached(result)
    progress.advance(drawn.examples)  # a workload drawn again counted as an example there too
    return SearchResult(
        policy, drawn.profile, drawn.examples, None, excused, coverage=coverage, drawn=drawn.drawn
    )


def _shares(
    strategy: st.SearchStrategy[Workload] | None, profile: str, examples: int
) -> list[tuple[st.SearchStrategy[Workload], int]]:
    """The strategies a search draws from, each with its examples: a caller's own, or the
    profile's search workloads and, for one example in :data:`.strategies.FAR_SHARE`, its far
    workloads, drawn on their own so that the far end of the axes gets that share for certain."""
    if strategy is not None:
        return [(strategy, examples)]
    name = profile_name(profile)
    far = examples // FAR_SHARE
    shares = [(search_workloads(name), examples - far), (far_workloads(name), far)]
    return [(drawn, count) for drawn, count in shares if count]


def find_counterexample(
    factory: SchedulerFactory,
    policy: str,
    profile: str = DEFAULT_PROFILE,
    max_examples: int | None = None,
    *,
    properties: TargetProperties | None = None,
) -> Counterexample | None:
    """The minimal counterexample :func:`search` finds, or None if every example passed."""
    return search(factory, policy, profile, max_examples, properties=properties).counterexample


def run_stateful(
    factory: SchedulerFactory,
    policy: str,
    profile: str = DEFAULT_PROFILE,
    max_examples: int | None = None,
    *,
    properties: TargetProperties | None = None,
    compare: bool | None = None,
) -> StatefulResult:
    """Run the state machine of :mod:`.stateful` against ``factory`` under ``profile``.

    ``compare`` as in :func:`.stateful.state_machine`. If Hypothesis reports several
    distinct failures, an invariant violation is preferred over a disagreement.
    """
    machine = state_machine(factory, policy, properties=properties, compare=compare)
    config = search_settings(profile, max_examples, 0)
    use_kvsched_cache()
    try:
        run_state_machine_as_test(machine, settings=config)
    except (StatefulFailure, BaseExceptionGroup) as error:
        failure = first_of(error, InvariantViolated) or first_of(error, StatefulFailure)
        if failure is None:
            raise
        finding = failure.finding if isinstance(failure, InvariantViolated) else None
        found = StatefulCounterexample(
            failure.workload, failure.summary, finding, reproduce_line(failure)
        )
        return StatefulResult(policy, profile, machine.runs, found)
    return StatefulResult(policy, profile, machine.runs, None)


def _counterexample(
    violation: _Violation, policy: str, examples: int, deterministic: bool
) -> Counterexample:
    finding = violation.finding
    description = (
        f"Minimal workload found by Hypothesis after {examples} examples: the {policy} target "
        f"breaks {finding.invariant} in iteration {finding.iteration}. {finding.message}"
    )
    workload = replace(violation.workload, name="counterexample", description=description)
    return Counterexample(
        workload, finding, examples, reproduce_line(violation), deterministic=deterministic
    )


def _beside_reserved(workload: Workload, properties: TargetProperties | None) -> Workload:
    """The workload with the target's reserved pages added to its pool, so that every request
    still fits the pages the target can hand out (section 1); a vLLM-style null page would
    otherwise make the tightest valid pool unservable, a false alarm on a correct engine."""
    if properties is None or not properties.reserved_pages:
        return workload
    limits = replace(
        workload.limits, pool_pages=workload.limits.pool_pages + len(properties.reserved_pages)
    )
    return replace(workload, limits=limits)
