"""Time and memory of kvsched's checks: the runtime monitor, a Hypothesis search, Z3 proofs.

Information, not a gate (timings on shared cores are noisy; see speed.py). Each benchmark
imports the check in ``setup``, so the suite's discovery stays light and a missing module skips
its benchmarks (asv's NotImplementedError) instead of failing the suite.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from kvsched.reference import POLICIES, Run, run

SEED = 0


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise NotImplementedError(f"{name} is not available: {error}") from None


class Monitor:
    """checks/monitor/runtime.py judging a stepped run of 1,000 requests (poisson-short-tight)."""

    params = sorted(POLICIES)
    param_names = ("policy",)
    timeout = 300
    run: Run
    monitor_run: Any

    def setup(self, policy: str) -> None:
        self.monitor_run = _module("kvsched.checks.monitor.runtime").monitor_run
        families = _module("kvsched.reference.families")
        self.workload = families.generate("poisson-short-tight", 1_000, SEED)
        self.run = run(self.workload, POLICIES[policy])

    def time_monitor(self, policy: str) -> None:
        _expect_clean(self.monitor_run(self.run))

    def peakmem_monitor(self, policy: str) -> None:
        _expect_clean(self.monitor_run(self.run))


class HypothesisSearch:
    """checks/search/explore.py: 100 workloads (the ci profile) through the reference."""

    timeout = 300
    search: Any

    def setup(self) -> None:
        self.search = _module("kvsched.checks.search.explore").search

    def time_search(self) -> None:
        _expect_clean(
            self.search(POLICIES["continuous"], "continuous", max_examples=100).counterexample
        )

    def peakmem_search(self) -> None:
        _expect_clean(
            self.search(POLICIES["continuous"], "continuous", max_examples=100).counterexample
        )


class Z3Proofs:
    """The page lemmas (checks/proofs/page_lemmas.py) and the induction proof for 3 requests."""

    timeout = 300
    pages: ModuleType
    induction: ModuleType
    model: ModuleType
    lemma_budget: float
    induction_budget: float

    def setup(self) -> None:
        self.pages = _module("kvsched.checks.proofs.page_lemmas")
        self.induction = _module("kvsched.checks.proofs.induction")
        self.model = _module("kvsched.checks.proofs.model")
        # Z3 budgets are resource units since checks/proofs/budgets.py; before it, seconds.
        try:
            budgets = importlib.import_module("kvsched.checks.proofs.budgets").DEFAULT
            self.lemma_budget, self.induction_budget = budgets.lemma, budgets.induction
        except ImportError:
            self.lemma_budget = self.induction_budget = 60.0

    def time_page_lemmas(self) -> None:
        lemmas = self.pages.LEMMAS
        _expect_proved([self.pages.prove_lemma(lemma, self.lemma_budget) for lemma in lemmas])

    def time_induction(self) -> None:
        self._induction()

    def peakmem_induction(self) -> None:
        self._induction()

    def _induction(self) -> None:
        rules = self.model.Rules("continuous")
        obligations = self.induction.prove_inductive(rules, 3, self.induction_budget)
        _expect_proved([obligation.answer for obligation in obligations])


# A check that finds a bug in the reference, or a proof that fails, would time something else
# than the work it claims to: the benchmark fails instead.
def _expect_clean(finding: object) -> None:
    if finding is not None:
        raise RuntimeError(f"the reference was expected to pass, got {finding}")


def _expect_proved(answers: list[Any]) -> None:
    failed = [answer for answer in answers if answer.verdict != "proved"]
    if failed:
        raise RuntimeError(f"{len(failed)} obligations not proved: {failed[0]}")
