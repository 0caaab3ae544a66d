"""The verdict on a target: for each invariant, holds, violated or not applicable, and how we know.

A :class:`Verdict` judges one target under one policy. It lists every invariant of the catalogue
(spec/invariants.py) with its :class:`InvariantVerdict`: the status, and the evidence behind it
(the monitor over N runs, Hypothesis with N examples, N direct calls of ``allocate_kv_pages``).
A violation carries the first :class:`~kvsched.checks.monitor.Finding` and the smallest workload
that shows it (:class:`FailingWorkload`). A :class:`Report` gathers the verdicts of one
``kvsched check`` (a learner's file is judged under both policies) and decides the exit code.

A pass needs positive evidence. Each verdict states what its runs reached (:class:`Coverage`),
and a check that observed less than its profile's minimum, or judged nothing, or lacked a part
the target must have, is **inconclusive** (exit 4): never a pass, never a finding.

These are plain frozen dataclasses: the check builds them in a child process and the renderers in
:mod:`.render` read them, so nothing here runs a scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvsched.checks.monitor.coverage import Coverage
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.verdict.declarations import Excuse, Grading, excuses
from kvsched.spec.applicability import applicable, declared_out
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.properties import TargetProperties
from kvsched.spec.text import plural
from kvsched.spec.vocabulary import ExitCode, Status, is_policy
from kvsched.spec.workload import Workload

HOLDS: Status = "holds"
VIOLATED: Status = "violated"
NOT_APPLICABLE: Status = "not applicable"
NOT_CHECKED: Status = "not checked"

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
"""A check's outcomes, and their exit codes' meanings: 0, 1 and 4."""


@dataclass(frozen=True)
class Evidence:
    """How much a target was exercised, per kind of check."""

    monitor_runs: int = 0
    """Runs the runtime monitor watched, every iteration of each (fixed and generated workloads)."""
    fixed_workloads: tuple[str, ...] = ()
    """The fixed workloads among them: "the teaching trace", "the given workload"."""
    hypothesis_examples: int = 0
    """Workloads Hypothesis generated (each also one monitored run)."""
    hypothesis_profile: str = ""
    log_iterations: int = 0
    """Iterations of a recorded event log replayed through the monitor."""
    watchdog: bool = False
    """The check was ended by kvsched's watch over the target's host process (the target died,
    hung, garbled the wire, wrote too much or outran the budget)."""
    proved: tuple[str, ...] = ()
    """Invariants Z3 proved inductive for the target's transition system (reference only)."""
    proof_requests: int = 0
    coverage: Coverage = field(default_factory=Coverage)
    """What the runs judged reached, read off the engine's record of them."""

    def describe(self, invariant: str) -> str:
        """The evidence for ``invariant`` in words, for the table's "how checked" column."""
        parts: list[str] = []
        if self.log_iterations:
            parts.append(f"monitor over a recorded log of {self.log_iterations} iterations")
        fixed = len(self.fixed_workloads)
        if fixed:
            parts.append(f"monitor on {' and '.join(self.fixed_workloads)}")
        if self.hypothesis_examples:
            parts.append(
                f"Hypothesis, {plural(self.hypothesis_examples, 'example')} "
                f"({self.hypothesis_profile})"
            )
        elif self.monitor_runs > fixed:
            parts.append(f"monitor over {plural(self.monitor_runs - fixed, 'more run')}")
        if self.watchdog:
            parts.append("kvsched stopped the target's process (the finding says why)")
        if invariant in self.proved:
            parts.append(f"Z3 induction, all iterations ({self.proof_requests} requests)")
        return "; ".join(parts) or "not exercised"


@dataclass(frozen=True)
class InvariantVerdict:
    invariant: str
    title: str
    status: str
    how: str
    layer: str = "safety"
    """Its layer of the catalogue (spec/semantics.md, section 8)."""


@dataclass(frozen=True)
class FailingWorkload:
    """The smallest failing workload found, and how to run it again."""

    workload: Workload
    found_by: str
    """"the teaching trace", "the given workload", "Hypothesis" ... ; "shrunk" when reduced."""
    reproduce_blob: str = ""
    """Hypothesis's ``@reproduce_failure`` blob, when Hypothesis found it."""
    saved_to: str = ""
    """The workload file written for ``kvsched check --workload`` and ``kvsched replay``."""


@dataclass(frozen=True)
class Verdict:
    """One target judged under one policy."""

    target: str
    kind: str
    """"scheduler", "learner" or "event log"."""
    policy: str
    invariants: tuple[InvariantVerdict, ...]
    evidence: Evidence
    finding: Finding | None = None
    counterexample: FailingWorkload | None = None
    notes: tuple[str, ...] = ()
    efficiency: tuple[tuple[str, int], ...] = ()
    """The efficiency layer's figures (EFF-1..EFF-4), measured, never a violation."""
    efficiency_on: str = ""
    """The run they were measured on: "the teaching trace", "the given workload"."""
    allocator_finding: Finding | None = None
    """The learner's ``allocate_kv_pages``, called directly, broke one of this table's
    invariants: the table says so instead of contradicting it."""
    declarations: tuple[Excuse, ...] = ()
    """Each declaration that took an invariant out or relaxed it, and what it excused."""
    inconclusive: tuple[str, ...] = ()
    """Why the evidence is too thin for a pass (the search stopped short of its minimum, the
    budget ran out): with no finding, the verdict is inconclusive."""

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the verdict is inconclusive, if it is: :attr:`inconclusive`, and whether its runs
        judged no iteration at all, whatever stopped them."""
        if self.failed or self.evidence.coverage.iterations:
            return self.inconclusive
        return (*self.inconclusive, "no iteration was judged: no run got as far as its judgement")

    @property
    def failed(self) -> bool:
        """Whether a violation was found: a finding of the runs', or of the allocator's."""
        return self.finding is not None or self.allocator_finding is not None

    @property
    def outcome(self) -> str:
        if self.failed:
            return FAIL
        return INCONCLUSIVE if self.reasons else PASS

    @property
    def ok(self) -> bool:
        return self.outcome == PASS

    def finding_for(self, invariant: str) -> Finding | None:
        """The finding that makes ``invariant`` violated: the runs' own, else the allocator's."""
        for finding in (self.finding, self.allocator_finding):
            if finding is not None and finding.invariant == invariant:
                return finding
        return None


@dataclass(frozen=True)
class AllocatorVerdict:
    """A learner's ``allocate_kv_pages`` checked directly (section 2): cases and first wrong one."""

    calls: int
    finding: Finding | None
    advice: tuple[str, ...] = ()
    """What it does outside the exercise's inputs that the Pythonic way would not: not graded
    unless ``--strict-inputs``."""

    @property
    def ok(self) -> bool:
        return self.finding is None


@dataclass(frozen=True)
class Report:
    """Everything one ``kvsched check`` found; exit code 0 when every verdict holds, else 1."""

    target: str
    verdicts: tuple[Verdict, ...]
    allocator: AllocatorVerdict | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    grade: Grading | None = None
    """Set by ``kvsched check --grade``: what the grader allowed, and the target's limits."""
    sandbox: tuple[str, str] | None = None
    """For a hosted target, the containment it ran in and why that one
    (checks/targets/sandbox.py: ``bwrap``, ``uid`` or ``none``); None where no code ran."""
    inconclusive: tuple[str, ...] = ()
    """Why the check as a whole cannot pass, beyond its verdicts' own reasons: a part of the
    target that must be judged is missing."""

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the check is inconclusive, if it is (no finding, too little evidence); ()."""
        reasons = [*self.inconclusive]
        for verdict in self.verdicts:
            reasons += [r for r in verdict.reasons if r not in reasons]
        if not self.verdicts and self.allocator is None:
            reasons.append("nothing was judged: the check ran no workload and no call")
        return tuple(reasons)

    @property
    def outcome(self) -> str:
        """FAIL on any finding; else INCONCLUSIVE when the evidence is too thin; else PASS."""
        if (self.allocator is not None and not self.allocator.ok) or any(
            v.failed for v in self.verdicts
        ):
            return FAIL
        return INCONCLUSIVE if self.reasons else PASS

    @property
    def ok(self) -> bool:
        return self.outcome == PASS

    @property
    def exit_code(self) -> int:
        return {PASS: ExitCode.OK, FAIL: ExitCode.FINDING}.get(self.outcome, ExitCode.INCONCLUSIVE)


def build_verdict(
    target: str,
    kind: str,
    policy: str,
    evidence: Evidence,
    finding: Finding | None,
    counterexample: FailingWorkload | None = None,
    notes: tuple[str, ...] = (),
    exercised: frozenset[str] | None = None,
    properties: TargetProperties | None = None,
    efficiency: tuple[tuple[str, int], ...] = (),
    efficiency_on: str = "",
    later: tuple[Finding, ...] | None = None,
    excused: Excused | None = None,
    allocator: AllocatorVerdict | None = None,
    inconclusive: tuple[str, ...] = (),
) -> Verdict:
    """Build the verdict for every invariant of the catalogue from the check's outcome.

    An invariant is violated if it is the finding's; not applicable if the target's policy does
    not constrain it (``applicable``); not checked if the check stopped before it got evidence
    (``exercised`` names what was exercised, all applicable ones by default); else it holds.
    ``later``: the check went on after ``finding`` and found these first violations of other
    invariants (``kvsched check --all-findings``); ``None``: it stopped at ``finding``.
    ``excused``: what the monitor counted of the declarations' excuses over the runs.
    ``allocator``: a learner's ``allocate_kv_pages`` called directly; when those calls break an
    invariant, its row says so too, so one invariant has one verdict.
    ``inconclusive``: why the evidence is too thin for a pass, if it is.

    The verdict is built once, from everything the check collected: nothing amends it after.
    """
    applicable_ids = {i.id for i in applicable(policy, properties)}
    violated = {f.invariant for f in (finding, *(later or ())) if f is not None}
    stopped = finding is not None and later is None  # else it checked on (all findings)
    allocated, calls = (allocator.finding, allocator.calls) if allocator else (None, 0)
    rows = []
    for invariant in CATALOGUE:
        if invariant.id in violated:
            status = VIOLATED
        elif invariant.id not in applicable_ids:
            status = NOT_APPLICABLE
        elif stopped or (exercised is not None and invariant.id not in exercised):
            status = NOT_CHECKED
        else:
            status = HOLDS
        if allocated is not None and invariant.id == allocated.invariant and status != VIOLATED:
            status = VIOLATED
            how = f"allocate_kv_pages called directly ({calls} calls): see above"
        elif status == NOT_APPLICABLE:
            how = _why_not(invariant.id, policy, properties)
        elif status == NOT_CHECKED and finding is not None:
            how = f"stopped at {finding.invariant}"
        else:
            how = evidence.describe(invariant.id)
        rows.append(InvariantVerdict(invariant.id, invariant.title, status, how, invariant.layer))
    conformance = [i.id for i in CATALOGUE if i.layer == "conformance" and i.id in applicable_ids]
    if not conformance:
        skipped = [i.id for i in CATALOGUE if i.layer == "conformance"]
        notes = (*notes, undeclared_note(skipped))
    return Verdict(
        target=target,
        kind=kind,
        policy=policy,
        invariants=tuple(rows),
        evidence=evidence,
        finding=finding,
        counterexample=counterexample,
        notes=notes,
        efficiency=efficiency,
        efficiency_on=efficiency_on,
        declarations=() if excused is None else excuses(properties, policy, excused),
        allocator_finding=allocated,
        inconclusive=inconclusive,
    )


def undeclared_note(skipped: list[str]) -> str:
    """The sentence a verdict carries when no conformance rule applied: what was not checked,
    and how to declare a policy or an admission rule."""
    return (
        f"Conformance was not checked ({', '.join(skipped)}): these constrain a batching policy "
        "or an admission rule, and this target declares none, so it got safety, liveness and "
        'efficiency only. Declare a policy with a class attribute (policy = "continuous" or '
        '"static") or pass --policy static|continuous; where the design differs from the '
        "lesson, add TargetProperties(order=..., chunking=..., budget=..., "
        "estimate_admission=...) as spec/eventlog.md section 4.6 describes (in an event log: "
        "the header's target)."
    )


def _why_not(invariant_id: str, policy: str, properties: TargetProperties | None) -> str:
    reason = declared_out(properties).get(invariant_id) if properties is not None else None
    if reason is not None:
        return reason
    if is_policy(policy):
        return f"does not constrain {policy} batching"
    return "NOT CHECKED: no policy declared (see the note below)"
