"""What ``kvsched check`` was asked to do, and what a run of it draws from: its seed and budget."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from kvsched.checks.search.runs import profile_runs
from kvsched.spec.properties import Declaration
from kvsched.spec.workload import Workload


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
    seed: int | None = None
    """Hypothesis's seed (``--seed``); None: derandomized under ``ci``, else drawn here. The
    report states it, so that a rerun with it draws the same examples."""
    budget: float | None = None
    """The check's wall-clock seconds (``--budget``; None: the profile's). Once three quarters
    are spent no new example starts, leaving the rest for shrinking and the other policy."""
    until: float | None = None
    """The ``time.monotonic()`` instant that follows from ``budget``, set by check_target."""

    @property
    def minimum_examples(self) -> int:
        """The Hypothesis examples a clean verdict needs (the profile's minimum, or fewer when
        ``--max-examples`` asks for fewer in all); 0 without Hypothesis."""
        if not self.hypothesis:
            return 0
        minimum = profile_runs(self.profile).minimum_examples
        return minimum if self.max_examples is None else min(minimum, self.max_examples)


def timed(options: CheckOptions, started: float) -> CheckOptions:
    """``options`` with the seed the run draws from and the instant its search stops."""
    # Hypothesis is imported only by what searches: a log check never calls this.
    from kvsched.checks.search.profiles import profile_settings

    seed = options.seed
    if seed is None and not profile_settings(options.profile).derandomize:
        seed = random.SystemRandom().getrandbits(32)
    budget = options.budget or profile_runs(options.profile).budget_seconds
    return replace(options, seed=seed, budget=budget, until=started + 0.75 * budget)


def replay_note(options: CheckOptions, drew: bool = True) -> str:
    """How to rerun exactly what ran: the profile, the seed, and that no database is used;
    ``drew``: whether Hypothesis drew anything (a scheduler's check under --no-hypothesis
    runs the fixed workloads alone, the same on every run)."""
    if not drew:
        return (
            "Hypothesis: not run (--no-hypothesis); the fixed workloads are the same on every run."
        )
    drawn = (
        f"seed {options.seed} (--profile {options.profile} --seed {options.seed} replays it)"
        if options.seed is not None
        else f"derandomized draws (--profile {options.profile}: the same on every run)"
    )
    return (
        f"Hypothesis: {drawn}; example database: none (no run reads or keeps examples), "
        f"time budget {options.budget:g} s."
    )
