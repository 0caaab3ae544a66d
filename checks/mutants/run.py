"""The mutation score: how many planted bugs ``kvsched check`` catches with the right invariant id.

A mutant counts as caught only if the check reports a violation and every violation it reports
carries the mutant's expected id: a page leak reported as a batching problem would tell the user
the wrong story, so it scores as missed. Each mutant goes through :func:`~.targets.load_target`
and :func:`~.judge.check_hosted`, the code path of ``kvsched check`` itself.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kvsched.checks.judge.hosted import check_hosted
from kvsched.checks.judge.target import CheckOptions, check_target
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.load import load_target
from kvsched.checks.verdict.report import Report


class ZooError(Exception):
    """The zoo module cannot be found or defines no mutants."""


class MutantSpec(Protocol):
    """What a zoo (:data:`.zoo.ZOO`, or a module passed to ``--zoo``) says about one mutant."""

    @property
    def name(self) -> str: ...
    @property
    def bug(self) -> str: ...
    @property
    def expected(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def timeout(self) -> float: ...
    def materialise(self, workdir: Path) -> str: ...


@dataclass(frozen=True)
class MutantOutcome:
    name: str
    bug: str
    expected: str
    reported: tuple[str, ...]
    """Invariant ids of every violation the check reported (allocator first, then policies)."""
    seconds: float

    @property
    def caught(self) -> bool:
        return bool(self.reported) and all(found == self.expected for found in self.reported)


def reported_ids(report: Report) -> tuple[str, ...]:
    """The ids of every violation in a report."""
    ids = []
    if report.allocator is not None and report.allocator.finding is not None:
        ids.append(report.allocator.finding.invariant)
    ids.extend(v.finding.invariant for v in report.verdicts if v.finding is not None)
    return tuple(ids)


def check_mutant(
    mutant: MutantSpec, workdir: Path, profile: str = "ci", isolated: bool = True
) -> MutantOutcome:
    """Check one mutant as ``kvsched check`` would and compare what it reports."""
    started = time.monotonic()
    spec = mutant.materialise(workdir)
    options = CheckOptions(policy=mutant.policy, profile=profile, timeout=mutant.timeout)
    if isolated:
        report = check_hosted(spec, options, Confinement(call_seconds=mutant.timeout))
    else:
        report = check_target(load_target(spec), options)
    return MutantOutcome(
        mutant.name, mutant.bug, mutant.expected, reported_ids(report), time.monotonic() - started
    )


def mutation_score(outcomes: Iterable[MutantOutcome]) -> tuple[int, int]:
    """(caught with the right id, total)."""
    results = list(outcomes)
    return sum(o.caught for o in results), len(results)


_MUTANT_FIELDS = ("name", "bug", "expected", "policy", "timeout", "materialise")


def load_zoo(path: Path) -> tuple[MutantSpec, ...]:
    """The ``ZOO`` tuple of the zoo module at ``path`` (the package's own is :data:`.zoo.ZOO`)."""
    if not path.is_file():
        raise ZooError(f"{path}: no such file; --zoo takes a Python module defining ZOO")
    spec = importlib.util.spec_from_file_location("kvsched_mutant_zoo", path)
    if spec is None or spec.loader is None:
        raise ZooError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the zoo is the user's file: a broken one is invalid input
        raise ZooError(f"{path}: cannot be imported ({type(error).__name__}: {error})") from None
    zoo = getattr(module, "ZOO", None)
    if not isinstance(zoo, tuple) or not zoo:
        raise ZooError(f"{path}: defines no ZOO tuple of mutants")
    for mutant in zoo:
        if not all(hasattr(mutant, field) for field in _MUTANT_FIELDS):
            raise ZooError(
                f"{path}: ZOO holds {mutant!r}, which is not a mutant "
                f"(a mutant has {', '.join(_MUTANT_FIELDS)})"
            )
    return zoo
