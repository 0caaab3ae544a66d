"""Every find shrinks to the witness its bug needs, and is named on it (checks/judge/trial.py,
checks/search/shrink.py).

Planted bugs of our own, each caught first on a fixed run (the seeded families, the long runs)
whose workload holds hundreds of requests: a double free after a preemption, a leak on a
preemption, a re-prefill after a preemption that drops its last token, a learner's leak after 40
finished requests and a class's leak after 20. The check must hand back the smallest witness: a
handful of requests where a handful shows the bug, the crowd where the bug needs a crowd, with
every size shrunk, and the finding it shows must be the earliest violation on that witness.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import pytest

from kvsched.checks.judge import trial as trial_module
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.judge.trial import Trial
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor
from kvsched.checks.mutants.engine import V1
from kvsched.checks.search.runs import profile_runs
from kvsched.checks.search.shrink import violation
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.load import load_target
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.reference.engine import run
from kvsched.reference.engine_scheduler import BlockManager, EngineScheduler
from kvsched.reference.engine_scheduler.config import NANO_CHUNKED
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq
from kvsched.reference.families import CHECK_SIZE, check_source, check_workloads
from kvsched.reference.pool import PagePool
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, StepOutcome
from kvsched.spec.workload import Limits, Workload, pages_for

LATE = 20
"""Finished requests after which :class:`LeaksAfterTwentyFinish` starts to leak."""


class DoubleFreeAfterPreemption(V1):
    """A preempted request's pages are freed again when it finishes, whoever holds them then."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.stale: dict[str, list[int]] = {}

    def _preempt(self, step: Step, seq: Seq) -> None:
        self.stale.setdefault(seq.id, []).extend(seq.table)
        super()._preempt(step, seq)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        freed = {rid: (*pages, *self.stale.pop(rid, ())) for rid, pages in outcome.freed.items()}
        return replace(outcome, freed=freed)  # BUG: the preemption's pages, freed twice


class _LeakyBlocks(BlockManager):
    leaking = False

    def release(self, pages: Sequence[int]) -> None:
        if not self.leaking:
            super().release(pages)
            return
        for page in pages:  # BUG: a last reference dropped never rejoins the free queue
            count = self.ref.pop(page)
            if count > 1:
                self.ref[page] = count - 1


class LeaksOnPreemption(V1):
    """A preempted request's pages are reported freed but never go back to the free queue."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.blocks = _LeakyBlocks(limits.pool_pages, self.config.null_page)

    def _preempt(self, step: Step, seq: Seq) -> None:
        assert isinstance(self.blocks, _LeakyBlocks)
        self.blocks.leaking = True
        super()._preempt(step, seq)
        self.blocks.leaking = False


class RePrefillDropsAToken(EngineScheduler):
    """nano-vllm's design, whose recompute after a preemption stops one token short (and holds
    the pages of what it computed): the dropped token is computed later, as a chunk of its own.
    Among a thousand requests that chunk sits beside another's (BATCH-5); on two, the page it
    needs is missing from the table first (PAGE-1)."""

    config = NANO_CHUNKED
    properties = NANO_CHUNKED.properties()

    def _admit(self, step: Step) -> None:
        super()._admit(step)
        for rid in step.admitted:
            seq = self.seqs[rid]
            if seq.generated and step.computed[rid] > 1:
                step.computed[rid] -= 1  # BUG: the re-prefill drops the last token
                step.budget += 1
                held = pages_for(seq.computed + step.computed[rid], self.limits.page_size)
                self.blocks.release(seq.table[held:])
                del seq.table[held:]


class _LateLeakyPool(PagePool):
    finished = 0

    def free(self, owner: str, pages: Sequence[int]) -> None:
        self.finished += 1
        if self.finished <= LATE:
            super().free(owner, pages)
            return
        for page in pages:
            del self._owner[page]  # BUG: never back on the free queue


class LeaksAfterTwentyFinish(ContinuousScheduler):
    """From the 21st finished request on, a finished request's pages never return."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(limits)
        self.pool = _LateLeakyPool(limits.pool_pages)


FAMILIES = check_source(CHECK_SIZE)


def _trial(target: type[V1] | type[ContinuousScheduler]) -> Trial:
    properties: TargetProperties | None = getattr(target, "properties", None)
    policy = properties.policy if properties is not None else ContinuousScheduler.policy
    deadline = Deadline(10.0)
    return Trial(deadline.factory(target), policy, properties, CheckOptions(), deadline)


def _family_find(trial: Trial) -> tuple[Workload, Finding]:
    """The first seeded family the target fails, as ``kvsched check`` replays them."""
    for workload in check_workloads(CHECK_SIZE):
        finding = trial.measured(workload)[0]
        if finding is not None:
            return workload, finding
    raise AssertionError("the planted bug went uncaught on the families")


def _still_violates(trial: Trial, workload: Workload, invariant: str) -> bool:
    result = run(workload, trial.factory, trial.policy, properties=trial.properties)
    return violation(result, invariant, trial.properties) is not None


@pytest.mark.parametrize(
    "target",
    [DoubleFreeAfterPreemption, LeaksOnPreemption, RePrefillDropsAToken],
    ids=lambda t: t.__name__,
)
def test_a_family_find_of_a_preemption_bug_shrinks_to_a_handful_of_requests(
    target: type[V1],
) -> None:
    # A preemption takes two requests; on main these kept 41 to 48 of the family's thousand,
    # with their sizes and the family's limits (64 slots, 113 pages of 16 tokens).
    trial = _trial(target)
    workload, finding = _family_find(trial)
    failing, named = trial.minimise(workload, finding, FAMILIES)
    witness = failing.workload
    assert len(witness.requests) <= 4, witness
    assert sum(r.prompt_tokens + r.output_tokens for r in witness.requests) <= 4 * len(
        witness.requests
    )
    assert witness.limits.pool_pages <= 8 and witness.limits.batch_limit <= 4, witness.limits
    assert failing.found_by == f"{FAMILIES}, shrunk"
    # Named by the earliest violation on the witness, observed there again ...
    again = trial.measured(witness)[0]
    assert again is not None
    assert (again.invariant, again.iteration) == (named.invariant, named.iteration)
    # ... and the violation the family showed is still shown: the shrink did not drift.
    assert _still_violates(trial, witness, finding.invariant)


def test_a_leak_after_twenty_finished_requests_keeps_twenty_one_of_one_token() -> None:
    # The bug needs 21 finished requests; nothing else: one token each, one page, one slot.
    trial = _trial(LeaksAfterTwentyFinish)
    workload, finding = _family_find(trial)
    failing, named = trial.minimise(workload, finding, FAMILIES)
    witness = failing.workload
    assert named.invariant == finding.invariant == "PAGE-3"
    assert len(witness.requests) == LATE + 1
    assert {(r.arrival, r.prompt_tokens, r.output_tokens) for r in witness.requests} == {(0, 0, 1)}
    assert witness.limits == Limits(batch_limit=1, page_size=1, pool_pages=1)


def test_a_later_violation_shrinks_to_the_earliest_one_it_follows_from() -> None:
    # Among the thousand requests a double free is also seen later as a page in two tables
    # (PAGE-2); shrinking from that one must show, and name, the double free it follows from.
    trial = _trial(DoubleFreeAfterPreemption)
    workload, _ = _family_find(trial)
    result = run(workload, trial.factory, trial.policy, properties=trial.properties)
    monitor = Monitor(workload, trial.policy, trial.properties, all_findings=True)
    for event in result.events:
        monitor.observe(event)
    first, later = monitor.finding, monitor.findings["PAGE-2"]
    assert first is not None and first.iteration < later.iteration
    failing, named = trial.minimise(workload, later, FAMILIES)
    assert named.invariant == first.invariant != later.invariant
    again = trial.measured(failing.workload)[0]
    assert again is not None and again.invariant == named.invariant
    assert f"as {later.invariant} in iteration {later.iteration}" in failing.workload.description
    assert len(failing.workload.requests) <= 4


def test_a_learner_leak_after_40_requests_is_shown_on_41_of_one_token(tmp_path: Path) -> None:
    # A learner's late leak: the check's verdict once listed 40 requests with the family's sizes.
    source = (files("kvsched.checks.mutants") / "learner" / "buggy_late_leak.py").read_text()
    assert "len(finished) <= 64" in source
    path = tmp_path / "late_leak_40.py"
    path.write_text(source.replace("len(finished) <= 64", "len(finished) <= 40"))
    report = check_target(load_target(str(path)), CheckOptions(policy="continuous"))
    (verdict,) = report.verdicts
    assert verdict.finding is not None and verdict.finding.invariant == "PAGE-3"
    assert verdict.counterexample is not None
    witness = verdict.counterexample.workload
    assert len(witness.requests) == 41
    assert {(r.arrival, r.prompt_tokens, r.output_tokens) for r in witness.requests} == {(0, 0, 1)}
    assert witness.limits == Limits(batch_limit=1, page_size=1, pool_pages=1)
    # The source line names the family run, as the table does.
    family = check_source(profile_runs("ci").learner_family_requests)
    assert verdict.counterexample.found_by == f"{family}, shrunk"
    assert family in " ".join(row.how for row in verdict.invariants if row.invariant == "PAGE-3")


def test_a_minimisation_stops_at_its_budget_of_calls_into_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Shrinking this find takes about 15,000 calls; allowed 6,000, it stops just past them.
    monkeypatch.setattr(trial_module, "SHRINK_CALLS", 6_000)
    trial = _trial(LeaksAfterTwentyFinish)
    workload, finding = _family_find(trial)
    calls: list[int] = []
    measured = Trial.violation

    def counted(
        self: Trial, candidate: Workload, invariant: str, iterations: int | None = None
    ) -> tuple[Finding | None, int]:
        found, ran = measured(self, candidate, invariant, iterations)
        calls.append(len(candidate.requests) + 2 * ran)
        return found, ran

    monkeypatch.setattr(Trial, "violation", counted)
    failing, named = trial.minimise(workload, finding, FAMILIES)
    assert sum(calls[:-1]) < 6_000 <= sum(calls)
    again = trial.measured(failing.workload)[0]
    assert again is not None and again.invariant == named.invariant == "PAGE-3"
    assert LATE < len(failing.workload.requests) < len(workload.requests)
