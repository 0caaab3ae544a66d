"""The one door: every path that hosts or judges a target comes in here.

``kvsched check``, the pytest plugin, ``kvsched sweep`` and ``kvsched report --policies`` each
hold a TARGET string. A :class:`Door` reads its kind once, off its form
(:func:`~kvsched.checks.targets.load.target_kind`, held to a grader's ``--expect``), and every
step after goes by that answer: a log is read where it lies, a scheduler class or a learner's
file is loaded once, in a host process under a
:class:`~kvsched.checks.targets.confinement.Confinement` (or, for trusted code, here under a
deadline), and the host is closed when the door is. What a door holds is then judged
(:func:`kvsched.checks.judge.hosted.judge`, a whole check) or run (:func:`hosted_scheduler`, a
scheduler for the runs of a sweep or a report), and each run is judged by :func:`judged_run`: the
reference engine and the runtime monitor, the same for a check's fixed workloads and a sweep's
cells.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import TracebackType

from kvsched.checks.judge.options import CheckOptions
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.proofs.evidence import modelled_policy
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.deadline import CallTimeout, Deadline, TargetExit
from kvsched.checks.targets.hosted_run import guarded
from kvsched.checks.targets.load import Kind, SchedulerTarget, Target, TargetError, load_target
from kvsched.checks.targets.process import HostFailure
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.checks.targets.source import expect
from kvsched.reference.engine import Run, run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.vocabulary import Expected
from kvsched.spec.workload import Workload

__all__ = [
    "UNLOADABLE",
    "Door",
    "HostFailure",
    "JudgedRun",
    "Kind",
    "TargetError",
    "hosted_scheduler",
    "judged_run",
]


UNLOADABLE = (TargetError, HostFailure, CallTimeout, TargetExit)
"""What :meth:`Door.load` fails with: a target that cannot be loaded (exit 2), a host its import
broke, and, in this process, an import past its deadline or one that exits."""


class Door:
    """One TARGET: its kind read once, then loaded once (:meth:`load`), and closed.

    ``confinement`` is the host's; ``None`` loads the target in this process (trusted code, for
    a debugger), under the check's per-call deadline. ``expected`` is a grader's ``--expect``:
    any other kind is refused (TargetError, exit 2) before anything runs.
    """

    def __init__(
        self, spec: str, confinement: Confinement | None, expected: Expected | None = None
    ) -> None:
        self.spec = spec
        self.kind: Kind = expect(spec, expected)
        self.confinement = confinement
        self.remote: RemoteTarget | None = None
        """The host process, once a hosted target is loaded."""
        self.modelled = ""
        """The policy of the reference scheduler the target names ("" for another target):
        only those have Z3 models."""
        self.started = time.monotonic()
        self._target: Target | None = None

    def load(self, options: CheckOptions | None = None) -> Target:
        """The target, loaded on the first call only; :data:`UNLOADABLE` names how it can fail.
        ``options``: the check that follows, whose modules are imported before a hosted target
        runs (:func:`preload`), and whose per-call timeout an import in this process gets."""
        if self._target is not None:
            return self._target
        self.started = time.monotonic()
        if self.kind == "event log":  # a log runs no code of the target's
            self._target = load_target(self.spec, self.kind)
        elif self.confinement is None:
            deadline = Deadline((options or CheckOptions()).timeout)
            self._target = deadline.call(
                f"importing {self.spec}", load_target, self.spec, self.kind
            )
        else:
            self.modelled = reference_policy(self.spec)
            if options is not None:
                preload(options, self.modelled, self.kind)
            self.remote = RemoteTarget(self.spec, self.confinement, self.kind)
            self._target = self.remote.load()
        return self._target

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()

    def __enter__(self) -> Door:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


OTHER_KINDS: dict[Kind, str] = {"learner": "a learner's solution", "event log": "an event log"}
"""How a refusal names a target that is not a scheduler class."""


@contextmanager
def hosted_scheduler(spec: str, confinement: Confinement) -> Iterator[SchedulerTarget]:
    """Scheduler class ``spec`` in a host process, for runs outside a check (a sweep, a report),
    the host closed on leaving. Its factory turns a broken host into an ordinary exception of
    the scheduler's (:class:`~kvsched.checks.targets.hosted_run.TargetProcessFailed`), so the
    engine ends that run with a fault. TargetError if it cannot be loaded or is not a scheduler
    class (exit 2); HostFailure if its import broke the host (PROTO-1)."""
    with Door(spec, confinement) as door:
        if door.kind != "scheduler":
            raise TargetError(
                f"{spec}: a report runs schedulers (package.module:Class or file.py:Class), not "
                f"{OTHER_KINDS[door.kind]}"
            )
        target = door.load()
        assert isinstance(target, SchedulerTarget) and door.remote is not None  # by its kind
        yield replace(target, factory=guarded(target, door.remote))


@dataclass(frozen=True)
class JudgedRun:
    """A run of a workload and the runtime monitor's judgement of it."""

    run: Run
    finding: Finding | None
    """The first violation, if any."""
    excused: Excused
    """What the target's declarations excused in it."""


def judged_run(
    workload: Workload,
    factory: SchedulerFactory,
    policy: str,
    properties: TargetProperties | None,
) -> JudgedRun:
    """Run ``workload`` through the reference engine under ``factory``'s schedulers, judged by
    the runtime monitor under ``policy`` and the target's declared ``properties``."""
    stepped = run(workload, factory, policy=policy, properties=properties)
    finding, excused = watch_run(stepped, properties)
    return JudgedRun(stepped, finding, excused)


SEARCH = (
    "kvsched.checks.search.counterexample",
    "kvsched.checks.search.explore",
    "kvsched.checks.search.shrink",
    "kvsched.checks.search.stateful",
    "kvsched.checks.search.strategies",
    "hypothesis.internal.conjecture.optimiser",  # imported by hypothesis.target() on first use
)
"""What the search imports, Hypothesis with it."""
PROOFS = (
    "kvsched.checks.proofs.catalogue",
    "kvsched.checks.proofs.induction",
    "kvsched.checks.proofs.model",
    "kvsched.checks.proofs.query",
)
"""What citing the reference's proofs imports, Z3 with it."""
ALLOCATOR = ("kvsched.checks.judge.allocator",)
"""What checking a learner's ``allocate_kv_pages`` imports, Hypothesis with it."""


def preload(options: CheckOptions, modelled: str, kind: Kind) -> None:
    """Import now what the check will import later: once the target runs, it may have written
    files, and kvsched imports nothing after that (tests/attacks/test_attack_containment.py
    checks that none is imported late)."""
    needed = (
        *(SEARCH if options.hypothesis else ()),
        *(PROOFS if modelled else ()),
        *(ALLOCATOR if kind == "learner" else ()),
    )
    for module in needed:
        importlib.import_module(module)


def reference_policy(spec: str) -> str:
    """The policy of the reference scheduler ``spec`` names, or "" if it names another target.

    Only the reference classes have Z3 models. They are kvsched's own code, found here by name
    under the installed ``kvsched`` package (which a module of the target's cannot shadow, as
    ``kvsched`` is already imported), so importing them does not import the target.
    """
    module, _, attribute = spec.partition(":")
    if not module.startswith("kvsched.") or not attribute or module.endswith(".py"):
        return ""
    if not all(part.isidentifier() for part in (*module.split("."), *attribute.split("."))):
        return ""
    try:
        found: object = importlib.import_module(module)
    except ImportError:
        return ""
    for part in attribute.split("."):
        found = getattr(found, part, None)
    return modelled_policy(found)  # type: ignore[arg-type]
