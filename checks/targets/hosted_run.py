"""A scheduler class that kvsched's engine runs in a host process outside a check (the report).

``kvsched check`` judges a hosted target and turns a broken host into a PROTO-1 verdict. A report
only runs the target, with the reference engine, to measure it; it gets the same host, under the
same :class:`~.confinement.Confinement`, from :func:`host_scheduler`. What breaks the host during
a run (a hang past the per-call deadline, an exit, garbage on the wire, the budget spent) is
raised into the engine as :class:`TargetProcessFailed`, an ordinary exception, so the engine
stops that run with a scheduler fault as it does for a scheduler that raises, and the report
shows the run as incomplete instead of hanging or crashing kvsched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.load import SchedulerTarget, TargetError
from kvsched.checks.targets.process import HostFailure
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import (
    ModelOutput,
    ScheduledBatch,
    Scheduler,
    SchedulerFactory,
    StepOutcome,
)
from kvsched.spec.workload import Limits, Request

T = TypeVar("T")


class TargetProcessFailed(Exception):
    """The host process of a scheduler under test stopped answering as the protocol demands."""


def host_scheduler(spec: str, confinement: Confinement) -> tuple[SchedulerTarget, RemoteTarget]:
    """Load scheduler ``spec`` in a new host process, and the host to close when done.

    TargetError if it cannot be loaded or is not a scheduler class (exit 2); HostFailure if its
    import breaks the host (a hang, an exit: a PROTO-1 finding).
    """
    remote = RemoteTarget(spec, confinement)
    try:
        target = remote.load()
        if not isinstance(target, SchedulerTarget):
            raise TargetError(
                f"{spec}: a report runs schedulers (package.module:Class or file.py:Class), not "
                "a learner's solution"
            )
    except BaseException:
        remote.close()
        raise
    factory = _GuardedFactory(target.factory, remote, target.properties)
    return replace(target, factory=factory), remote


class _GuardedFactory:
    """Builds each scheduler in the host; carries the target's declarations, which the engine
    loop reads to know what the target's preemptions and restarts earn (the run's bound)."""

    def __init__(
        self, factory: SchedulerFactory, remote: RemoteTarget, properties: TargetProperties | None
    ) -> None:
        self.factory, self.remote, self.properties = factory, remote, properties

    def __call__(self, limits: Limits) -> Scheduler:
        built = _call(self.remote, "the constructor", self.factory, limits)
        return _Guarded(built, self.remote)


def _call(remote: RemoteTarget, label: str, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` into the host, named for a failure's message; a broken host is the
    scheduler's failure."""
    remote.doing = label
    try:
        return function(*args)
    except HostFailure as failure:
        raise TargetProcessFailed(str(failure)) from None


class _Guarded:
    """Forwards each call to the hosted scheduler through :func:`_call`."""

    def __init__(self, inner: Scheduler, remote: RemoteTarget) -> None:
        self.inner, self.remote = inner, remote

    def add_request(self, request: Request) -> None:
        _call(self.remote, "add_request()", self.inner.add_request, request)

    def schedule(self) -> ScheduledBatch:
        return _call(self.remote, "schedule()", self.inner.schedule)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        return _call(self.remote, "update_from_output()", self.inner.update_from_output, output)
