"""Judging a target: gather the evidence for every invariant and turn it into a :class:`Report`.

For a scheduler, under its policy, in this order, stopping at the first violation:

1. the runtime monitor over the fixed workloads: the one given with ``--workload`` (first, so a
   saved counterexample replays exactly), then the lesson's teaching trace;
2. Hypothesis (:func:`kvsched.checks.search.explore.search`) over generated workloads, under
   the selected profile.

A violation found on a fixed workload is shrunk (:mod:`kvsched.checks.search.shrink`), and
Hypothesis is asked for a smaller workload breaking the same invariant; the smallest wins. A
learner's file is judged under both policies after its ``allocate_kv_pages`` is checked directly
(:mod:`.allocator`). Every call into the target runs under a deadline: kept by the host process
for a hosted target (:mod:`.hosted`, the way ``kvsched check`` runs), by an alarm in this process
otherwise (:mod:`kvsched.checks.targets.deadline`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvsched.checks import progress
from kvsched.checks.judge.allocator import check_allocator
from kvsched.checks.judge.eventlog import check_event_log
from kvsched.checks.judge.grade import enforce
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.proofs.evidence import modelled_policy, proved_invariants
from kvsched.checks.search.shrink import shrink_workload
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.learner import learner_factory
from kvsched.checks.targets.load import (
    EventLogTarget,
    LearnerTarget,
    SchedulerTarget,
    Target,
    TargetError,
)
from kvsched.checks.verdict import report as verdict_report
from kvsched.checks.verdict.report import (
    Evidence,
    FailingWorkload,
    Report,
    Verdict,
    build_verdict,
    with_allocator,
)
from kvsched.reference.efficiency import measure
from kvsched.reference.engine import run
from kvsched.reference.families import CHECK_SOURCE, check_workloads
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.vocabulary import POLICY_NAMES, Declaration
from kvsched.spec.workload import Workload

if TYPE_CHECKING:
    from kvsched.checks.search.explore import SearchResult


@dataclass(frozen=True)
class CheckOptions:
    """What ``kvsched check`` was asked to do."""

    workload: Workload | None = None
    """A workload to replay before anything else (``--workload``)."""
    workload_file: str = ""
    """The file ``workload`` was read from, named again when it fails."""
    policy: str = ""
    """Overrides the target's declared policy; a learner's file is judged under both without it."""
    profile: str = "ci"
    """The Hypothesis profile (checks/search/profiles.py)."""
    max_examples: int | None = None
    hypothesis: bool = True
    teaching_trace: bool = True
    families: bool = True
    """Replay the seeded realistic families (``reference.families.CHECK_FAMILIES``)."""
    strict_inputs: bool = False
    """Grade what ``allocate_kv_pages`` does outside the exercise's inputs (else advice)."""
    timeout: float = 10.0
    """Seconds each call into the target may take before it counts as hung (PROTO-1)."""
    proof_requests: int = 5
    """Requests in the Z3 induction proofs cited for a reference scheduler; 0 skips them."""
    all_findings: bool = False
    """For an event log: check on after a violation, for every invariant's first violation."""
    allowed: frozenset[Declaration] | None = None
    """Grading (``--grade``): the declarations allowed, any other refused; ``None``: not grading."""


def check_target(
    target: Target,
    options: CheckOptions,
    deadline: Deadline | None = None,
    modelled: str | None = None,
) -> Report:
    """Judge ``target``; every call into it runs under ``deadline`` (``options.timeout`` each).

    ``modelled`` is the policy whose Z3 model describes the target ("" for none); by default it
    is read off the target's factory, which for a hosted target is a proxy that no model describes.
    """
    started = time.monotonic()
    if deadline is None:
        deadline = Deadline(options.timeout)
    if isinstance(target, SchedulerTarget):
        policy = options.policy or target.policy
        properties = target.properties
        if properties is not None and options.policy:  # --policy overrides the declaration
            properties = replace(properties, policy=options.policy)
        where = f"{target.spec} (its policy and properties = TargetProperties(...))"
        enforce(options.allowed, properties, policy, where)
        verdict = check_scheduler(
            target.spec, "scheduler", target.factory, policy, properties, options, deadline
        )
        if modelled is None:
            modelled = modelled_policy(target.factory)
        if verdict.ok and options.proof_requests and modelled and modelled == policy:
            size = options.proof_requests
            progress.phase(f"{policy}: Z3 induction proofs, {size} symbolic requests")
            proved = proved_invariants(policy, size)  # Z3's own resource budget
            evidence = replace(verdict.evidence, proved=proved, proof_requests=size)
            verdict = verdict_report.with_evidence(verdict, evidence, properties)
        return Report(target.spec, (verdict,), seconds=time.monotonic() - started)
    if isinstance(target, LearnerTarget):
        solution = target.solution
        allocator = None
        if solution.allocate_kv_pages is not None:
            allocator = check_allocator(solution.allocate_kv_pages, deadline, options.strict_inputs)
            progress.result(allocator)
        verdicts = []
        if solution.schedule_iteration is not None:
            for policy in (options.policy,) if options.policy else POLICY_NAMES:
                factory = learner_factory(solution.schedule_iteration, policy)
                verdict = check_scheduler(
                    target.spec, "learner", factory, policy, None, options, deadline
                )
                verdicts.append(with_allocator(verdict, allocator))
        notes = (
            ()
            if solution.schedule_iteration
            else ("no schedule_iteration: only allocate_kv_pages was checked",)
        )
        return Report(
            target.spec, tuple(verdicts), allocator, time.monotonic() - started, notes=notes
        )
    assert isinstance(target, EventLogTarget)
    verdict = check_event_log(
        target.spec, target.path, options.policy, options.all_findings, options.allowed
    )
    return Report(target.spec, (verdict,), seconds=time.monotonic() - started)


def check_scheduler(
    label: str,
    kind: str,
    factory: SchedulerFactory,
    policy: str,
    properties: TargetProperties | None,
    options: CheckOptions,
    deadline: Deadline,
) -> Verdict:
    """The verdict on one scheduler under ``policy``: fixed workloads first, then Hypothesis."""
    trial = _Trial(deadline.factory(factory), policy, properties, options, deadline)
    fixed: list[tuple[Workload, str]] = []
    if options.workload is not None:
        given = options.workload
        if properties is not None and (why := properties.unservable(given.requests, given.limits)):
            raise TargetError(f"{options.workload_file or given.name}: {why}")
        fixed.append((given, "the given workload"))
    if options.teaching_trace:
        fixed.append((load_teaching_trace(), "the teaching trace"))
    if options.families and kind == "scheduler":
        # A learner's dict-based state costs seconds per thousand requests; classes run these.
        fixed.extend((w, CHECK_SOURCE) for w in check_workloads())
    names: list[str] = []
    efficiency: tuple[tuple[str, int], ...] = ()  # measured on the first fixed run
    measured_on = ""

    def verdict(
        evidence: Evidence, finding: Finding | None, failing: FailingWorkload | None = None
    ) -> Verdict:
        return build_verdict(
            label, kind, policy, evidence, finding, failing, properties=properties,
            efficiency=efficiency, efficiency_on=measured_on, excused=excused,
        )  # fmt: skip

    runs, excused = 0, Excused()  # what the declarations excused, over the runs judged
    for workload, source in fixed:
        progress.phase(f"{policy or 'declared'}: monitor on {source} ({workload.name})")
        runs += 1
        names += [source] if source not in names else []
        finding, figures, seen = trial.measured(workload)
        excused += seen
        if not measured_on:
            efficiency, measured_on = figures, source
        if finding is not None:
            evidence = Evidence(monitor_runs=runs, fixed_workloads=tuple(names))
            failing, finding = trial.minimise(workload, finding, source)
            return verdict(evidence, finding, failing)
    evidence = Evidence(monitor_runs=runs, fixed_workloads=tuple(names))
    if not options.hypothesis:
        return verdict(evidence, None)
    result = trial.search()
    excused += result.excused
    evidence = replace(
        evidence,
        monitor_runs=evidence.monitor_runs + result.examples,
        hypothesis_examples=result.examples,
        hypothesis_profile=options.profile,
    )
    found = result.counterexample
    if found is None:
        return verdict(evidence, None)
    failing = FailingWorkload(found.workload, "Hypothesis (shrunk)", found.reproduce)
    return verdict(evidence, found.finding, failing)


@dataclass(frozen=True)
class _Trial:
    """One scheduler, already under its deadline, and the ways to exercise it."""

    factory: SchedulerFactory
    policy: str
    properties: TargetProperties | None
    options: CheckOptions
    deadline: Deadline

    def measured(
        self, workload: Workload
    ) -> tuple[Finding | None, tuple[tuple[str, int], ...], Excused]:
        """Run ``workload`` through the engine and the monitor: the first finding, if any, the
        run's efficiency figures (EFF-1..EFF-4) and what the declarations excused in it."""
        self.deadline.context = f"workload '{workload.name}' ({self.policy or 'no'} policy)"
        result = run(workload, self.factory, policy=self.policy, properties=self.properties)
        figures = measure(workload, result.events, self.properties).by_id()
        finding, excused = watch_run(result, self.properties)
        return finding, tuple(figures.items()), excused

    def search(self, invariant: str | None = None) -> SearchResult:
        # Hypothesis is imported only when it is used.
        from kvsched.checks.search.explore import search
        from kvsched.checks.search.strategies import workloads

        self.deadline.context = f"a workload Hypothesis generated ({self.policy or 'no'} policy)"
        options = self.options
        return search(
            self.factory,
            self.policy,
            options.profile,
            options.max_examples,
            properties=self.properties,
            invariant=invariant,
            # Looking for a smaller witness of a known violation: small workloads only.
            strategy=None if invariant is None else workloads(),
        )

    def minimise(
        self, workload: Workload, finding: Finding, source: str
    ) -> tuple[FailingWorkload, Finding]:
        """The smallest workload breaking ``finding.invariant``: shrunk, or found by Hypothesis."""
        given = workload is self.options.workload
        saved = self.options.workload_file if given else ""
        if self.deadline.expired:
            # After a hang, each shrinking step could hang again: shown where it happened.
            return FailingWorkload(workload, source, saved_to=saved), finding
        invariant = finding.invariant

        def still_fails(candidate: Workload) -> bool:
            found = self.measured(candidate)[0]
            return found is not None and found.invariant == invariant

        smallest = shrink_workload(workload, still_fails)
        if smallest == workload and given:
            return FailingWorkload(workload, source, saved_to=saved), finding
        found_by = f"{source}, shrunk" if smallest != workload else source
        blob = ""
        if self.options.hypothesis and not _tiny(smallest) and not self.deadline.expired:
            other = self.search(invariant).counterexample
            if other is not None and _size(other.workload) < _size(smallest):
                smallest, found_by, blob = other.workload, "Hypothesis (shrunk)", other.reproduce
        small_finding = self.measured(smallest)[0]
        if small_finding is None or small_finding.invariant != invariant:
            return FailingWorkload(workload, source), finding  # the target is not deterministic
        description = (
            f"Smallest workload found from {source}: under {self.policy or 'its own'} policy "
            f"the target breaks {invariant}. {small_finding.message}"
        )
        smallest = replace(smallest, name="counterexample", description=description)
        return FailingWorkload(smallest, found_by, blob), small_finding


def _tiny(workload: Workload) -> bool:
    """Too small for a search to find anything smaller worth the time."""
    return len(workload.requests) <= 2 and _size(workload)[1] <= 4


def _size(workload: Workload) -> tuple[int, int]:
    return len(workload.requests), sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
