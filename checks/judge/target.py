"""Judging a target: gather the evidence for every invariant and turn it into a :class:`Report`.

For a scheduler, under its policy, in this order, stopping at the first violation:

1. the runtime monitor over the fixed workloads: the one given with ``--workload`` (first, so a
   saved counterexample replays exactly), then the lesson's teaching trace, then contexts up to
   the whole usable pool (``reference.families.long_contexts``), then the seeded check families
   at the sizes the profile gives a target of its kind (``ProfileRuns``), then, for a class, a
   long run of ten thousand requests or more (``reference.families.long_run``);
2. Hypothesis (:func:`kvsched.checks.search.explore.search`) over generated workloads, under
   the selected profile.

A violation found on a fixed workload is shrunk (:mod:`kvsched.checks.search.shrink`) and then
named by the earliest violation on the smallest witness (:meth:`.trial.Trial.minimise`: shrink
first, then name); Hypothesis is asked for a smaller workload only when more than a handful of
requests are left, and the smaller wins. A learner's file is judged under both policies after
its ``allocate_kv_pages`` is checked directly (:mod:`.allocator`). Every call into the target
runs under a deadline: kept by the host process for a hosted target (:mod:`.hosted`, the way
``kvsched check`` runs), by an alarm in this process otherwise
(:mod:`kvsched.checks.targets.deadline`). The report states the run's seed and budget
(:mod:`.options`), so that a rerun with them draws the same examples.
"""

from __future__ import annotations

import time
from dataclasses import replace

from kvsched.checks import progress
from kvsched.checks.judge.eventlog import check_event_log
from kvsched.checks.judge.grade import enforce
from kvsched.checks.judge.options import CheckOptions as CheckOptions
from kvsched.checks.judge.options import replay_note, timed
from kvsched.checks.judge.proved import cited_proofs
from kvsched.checks.judge.trial import Draws, Trial
from kvsched.checks.monitor.coverage import Coverage
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.proofs.evidence import modelled_policy
from kvsched.checks.search.runs import profile_runs
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.learner import LEARNER_FUNCTIONS, learner_factory
from kvsched.checks.targets.load import (
    EventLogTarget,
    LearnerTarget,
    SchedulerTarget,
    Target,
    TargetError,
)
from kvsched.checks.verdict.declarations import Grading
from kvsched.checks.verdict.report import (
    AllocatorVerdict,
    Evidence,
    FailingWorkload,
    Report,
    Verdict,
    build_verdict,
)
from kvsched.reference.families import (
    LONG_CONTEXT_PAGES,
    LONG_CONTEXTS,
    check_source,
    check_workloads,
    long_contexts,
    long_run,
    long_run_source,
)
from kvsched.spec.properties import DECLARATIONS, TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.text import plural
from kvsched.spec.vocabulary import POLICY_NAMES
from kvsched.spec.workload import Workload

UNJUDGED = {
    "allocate_kv_pages": "its page counts, called directly (section 2)",
    "schedule_iteration": "every invariant of its runs (sections 3 and 8)",
}
"""What a learner's missing function leaves unjudged."""


def graded(options: CheckOptions, host: Confinement | None, log: bool) -> Grading | None:
    """What a graded report states (``kvsched check --grade``): the declarations the grader
    allowed, in the catalogue's order, and the limits the target ran under; ``None`` when the
    check is not graded."""
    if options.allowed is None:
        return None
    allowed = tuple(name for name in DECLARATIONS if name in options.allowed)
    if log:
        limits = "An event log runs no code of the target's."
    elif host is not None:
        limits = host.describe()
    else:
        limits = "The target ran in kvsched's own process, unconfined."
    return Grading(allowed, limits)


def check_target(
    target: Target,
    options: CheckOptions,
    deadline: Deadline | None = None,
    modelled: str | None = None,
    host: Confinement | None = None,
    started: float | None = None,
) -> Report:
    """Judge ``target``; every call into it runs under ``deadline`` (``options.timeout`` each).

    ``modelled`` is the policy whose Z3 model describes the target ("" for none); by default it
    is read off the target's factory, which for a hosted target is a proxy that no model describes.
    ``host``: the limits of the process the target runs in, if it is hosted, which the report
    states; ``started``: when the check began (by default now), if loading it came first.
    """
    started = time.monotonic() if started is None else started
    if isinstance(target, EventLogTarget):  # a recording: nothing is drawn, nothing is called
        verdict = check_event_log(
            target.spec, target.path, options.policy, options.all_findings, options.allowed
        )
        seconds = time.monotonic() - started
        return Report(target.spec, (verdict,), seconds=seconds, grade=graded(options, None, True))
    options = timed(options, started)
    if deadline is None:
        deadline = Deadline(options.timeout)
    if isinstance(target, SchedulerTarget):
        policy = options.policy or target.policy
        properties = target.properties
        if properties is not None and options.policy:  # --policy overrides the declaration
            properties = replace(properties, policy=options.policy)
        where = f"{target.spec} (its policy and properties = TargetProperties(...))"
        enforce(options.allowed, properties, policy, where)
        if modelled is None:
            modelled = modelled_policy(target.factory)
        proofs = options.proof_requests if modelled and modelled == policy else 0
        verdict = check_scheduler(
            target.spec, "scheduler", target.factory, policy, properties, options, deadline,
            proofs=proofs,
        )  # fmt: skip
        seconds = time.monotonic() - started
        notes = (replay_note(options, drew=options.hypothesis), *hosted_notes(host))
        sandbox = hosted_in(host)
        return Report(
            target.spec,
            (verdict,),
            seconds=seconds,
            notes=notes,
            sandbox=sandbox,
            grade=graded(options, host, False),
        )
    if isinstance(target, LearnerTarget):
        solution = target.solution
        allocator = None
        if solution.allocate_kv_pages is not None:
            # Hypothesis draws the allocator's inputs; imported here, a log check never loads it.
            from kvsched.checks.judge.allocator import check_allocator

            allocator = check_allocator(
                solution.allocate_kv_pages,
                deadline,
                options.strict_inputs,
                examples=profile_runs(options.profile).allocator_examples,
                seed=options.seed,
            )
            progress.result(allocator)
        verdicts = []
        if solution.schedule_iteration is not None:
            draws = Draws()  # the policies' searches draw alike: the second judges the first's
            for policy in (options.policy,) if options.policy else POLICY_NAMES:
                factory = learner_factory(
                    solution.schedule_iteration, policy, isolated=solution.isolated
                )
                verdict = check_scheduler(
                    target.spec, "learner", factory, policy, None, options, deadline,
                    allocator=allocator, draws=draws,
                )  # fmt: skip
                verdicts.append(verdict)
        # The exercise is both functions: a part that is missing is a part not judged.
        return Report(
            target.spec,
            tuple(verdicts),
            allocator,
            time.monotonic() - started,
            notes=(replay_note(options), *hosted_notes(host)),
            sandbox=hosted_in(host),
            grade=graded(options, host, False),
            inconclusive=tuple(
                f"{target.spec} defines no {name}, and the exercise is both functions "
                f"(spec/learner.md): {UNJUDGED[name]} went unjudged"
                for name in LEARNER_FUNCTIONS
                if getattr(solution, name) is None
            ),
        )
    raise TypeError(f"not a target: {target!r}")  # the union is closed: a bug of kvsched's


def hosted_notes(host: Confinement | None) -> tuple[str, ...]:
    """What a report says of the process a hosted target ran in: its containment and limits."""
    return () if host is None else (host.describe(),)


def hosted_in(host: Confinement | None) -> tuple[str, str] | None:
    """The containment a hosted target ran in and why that one (:attr:`Report.sandbox`)."""
    if host is None:
        return None
    contained = host.containment()
    return contained.kind, contained.reason


def check_scheduler(
    label: str,
    kind: str,
    factory: SchedulerFactory,
    policy: str,
    properties: TargetProperties | None,
    options: CheckOptions,
    deadline: Deadline,
    allocator: AllocatorVerdict | None = None,
    proofs: int = 0,
    draws: Draws | None = None,
) -> Verdict:
    """The verdict on one scheduler under ``policy``: fixed workloads first, then Hypothesis.

    ``allocator``: a learner's ``allocate_kv_pages``, already called directly. ``proofs``: the
    number of symbolic requests of the Z3 induction proofs a clean verdict cites, 0 for none (only
    the reference schedulers have models). ``draws``: shared by the checks of one learner under
    each policy, whose searches draw alike (:class:`.trial.Draws`). The verdict is built once,
    from all of it.
    """
    # A learner's search neither climbs nor runs a workload twice: each of its iterations is a
    # round trip to its host. On the correct solution under seeds 1 to 3, the two took its
    # check from 9,100 to 44,100 round trips (29,000 on average) to 19,800 to 23,300 (22,100),
    # and the learner's mutants are caught without either (docs/measurements.md). A class keeps
    # both: the crowd its size-dependent bugs need is reached by climbing.
    learner = kind == "learner"
    trial = Trial(
        deadline.factory(factory), policy, properties, options, deadline,
        climb=not learner, rerun=not learner, draws=draws if learner else None,
    )  # fmt: skip
    fixed: list[tuple[Workload, str]] = []
    if options.workload is not None:
        given = options.workload
        if properties is not None and (why := properties.unservable(given)):
            raise TargetError(f"{options.workload_file or given.name}: {why}")
        fixed.append((given, "the given workload"))
    if options.teaching_trace:
        fixed.append((load_teaching_trace(), "the teaching trace"))
    if options.families:
        # Contexts up to the whole pool the target can use: page ids it reserves come on top.
        reserved = len(properties.reserved_pages) if properties is not None else 0
        long = long_contexts(usable_pages=LONG_CONTEXT_PAGES, reserved=reserved)
        if properties is None or not properties.unservable(long):
            fixed.append((long, LONG_CONTEXTS))
        sizes = profile_runs(options.profile)
        for size in sizes.families(kind):
            fixed.extend((w, check_source(size)) for w in check_workloads(size))
        if kind == "scheduler" and sizes.long_run:
            budget = properties.token_budget if properties is not None else None
            run_long = long_run(sizes.long_run, budget)
            fixed.append((run_long, long_run_source(sizes.long_run)))
    names: list[str] = []
    efficiency: tuple[tuple[str, int], ...] = ()  # measured on the first fixed run
    measured_on = ""

    def verdict(
        evidence: Evidence,
        finding: Finding | None,
        failing: FailingWorkload | None = None,
        notes: tuple[str, ...] = (),
        inconclusive: tuple[str, ...] = (),
    ) -> Verdict:
        if proofs and finding is None and not inconclusive:
            # A clean verdict cites what Z3 proved of the design: proved once, then cached.
            progress.phase(f"{policy}: Z3 induction proofs, {proofs} symbolic requests")
            proved = cited_proofs(policy, proofs)  # Z3's own resource budget
            evidence = replace(evidence, proved=proved, proof_requests=proofs)
        return build_verdict(
            label, kind, policy, evidence, finding, failing, notes, properties=properties,
            efficiency=efficiency, efficiency_on=measured_on, excused=excused,
            allocator=allocator, inconclusive=inconclusive,
        )  # fmt: skip

    runs, excused, coverage = 0, Excused(), Coverage()  # over the runs judged
    for workload, source in fixed:
        progress.phase(f"{policy or 'declared'}: monitor on {source} ({workload.name})")
        runs += 1
        names += [source] if source not in names else []
        finding, figures, seen, reach = trial.measured(workload)
        excused += seen
        coverage += reach
        if not measured_on:
            efficiency, measured_on = figures, source
        if finding is not None:
            progress.failed(finding.invariant, f"{finding.where} of {source}")
            broken = finding.invariant
            progress.phase(f"{policy or 'declared'}: making the {broken} witness smaller")
            evidence = Evidence(monitor_runs=runs, fixed_workloads=tuple(names), coverage=coverage)
            failing, finding = trial.minimise(workload, finding, source)
            return verdict(evidence, finding, failing)
    evidence = Evidence(monitor_runs=runs, fixed_workloads=tuple(names), coverage=coverage)
    if not options.hypothesis:
        return verdict(evidence, None)
    result = trial.search()
    excused += result.excused
    evidence = replace(
        evidence,
        monitor_runs=evidence.monitor_runs + result.examples,
        hypothesis_examples=result.examples,
        hypothesis_profile=options.profile,
        coverage=coverage + result.coverage,
    )
    found = result.counterexample
    if found is not None:
        failing = FailingWorkload(
            found.workload, "a workload Hypothesis drew, shrunk", found.reproduce
        )
        return verdict(evidence, found.finding, failing)
    minimum = options.minimum_examples
    if result.examples < minimum:
        # The budget stops no search short of the minimum (search's ``minimum``): a search
        # still short of it ended for another reason, which the target may have caused.
        short = (
            f"Hypothesis ran {plural(result.examples, 'example')} under {policy or 'its own'} "
            f"policy, fewer than the {minimum} the {options.profile} profile needs for a pass"
        )
        return verdict(evidence, None, inconclusive=(short,))
    if not result.budget_spent:
        return verdict(evidence, None)
    spent = (
        f"The time budget stopped the search under {policy or 'its own'} policy after "
        f"{result.examples} examples, past the profile's minimum of {minimum} but before "
        "its count; where it stops depends on the machine's speed, so rerun with a "
        "larger --budget to run them all."
    )
    return verdict(evidence, None, notes=(spent,))
