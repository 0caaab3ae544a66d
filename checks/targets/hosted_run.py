"""A scheduler class that kvsched's engine runs in a host process outside a check (the report).

``kvsched check`` judges a hosted target and turns a broken host into a PROTO-1 verdict. A report
or a sweep only runs the target, with the reference engine, to measure it; it gets the same host,
under the same :class:`~.confinement.Confinement`, from the judge's door
(``kvsched.checks.judge.door.hosted_scheduler``), which wraps its factory in :func:`guarded`.
What breaks the host during a run (a hang past the per-call deadline, an exit, garbage on the
wire, the budget spent) is raised into the engine as :class:`TargetProcessFailed`, an ordinary
exception, so the engine stops that run with a scheduler fault as it does for a scheduler that
raises, and the report shows the run as incomplete instead of hanging or crashing kvsched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kvsched.checks.targets.load import SchedulerTarget
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


def guarded(target: SchedulerTarget, remote: RemoteTarget) -> SchedulerFactory:
    """``target``'s factory, hosted by ``remote``, with a broken host raised as the scheduler's
    :class:`TargetProcessFailed`."""
    return _GuardedFactory(target.factory, remote, target.properties)


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
