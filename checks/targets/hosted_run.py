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

from dataclasses import replace

from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.load import SchedulerTarget, TargetError
from kvsched.checks.targets.process import HostFailure
from kvsched.checks.targets.remote import RemoteTarget
from kvsched.spec.protocol import (
    ModelOutput,
    ScheduledBatch,
    Scheduler,
    SchedulerFactory,
    StepOutcome,
)
from kvsched.spec.workload import Limits, Request


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
    return replace(target, factory=_guarded(target.factory)), remote


def _guarded(factory: SchedulerFactory) -> SchedulerFactory:
    def build(limits: Limits) -> Scheduler:
        try:
            return _Guarded(factory(limits))
        except HostFailure as failure:
            raise TargetProcessFailed(str(failure)) from None

    return build


class _Guarded:
    """Forwards each call to the hosted scheduler; a broken host is the scheduler's failure."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner = inner

    def add_request(self, request: Request) -> None:
        try:
            self.inner.add_request(request)
        except HostFailure as failure:
            raise TargetProcessFailed(str(failure)) from None

    def schedule(self) -> ScheduledBatch:
        try:
            return self.inner.schedule()
        except HostFailure as failure:
            raise TargetProcessFailed(str(failure)) from None

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        try:
            return self.inner.update_from_output(output)
        except HostFailure as failure:
            raise TargetProcessFailed(str(failure)) from None
