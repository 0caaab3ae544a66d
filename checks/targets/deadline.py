"""Per-call deadlines: a scheduler under test that hangs gets a verdict, not a hung kvsched.

This is the in-process deadline, for code the user trusts (the pytest plugin's ``in-process`` mode,
tests): a target that kvsched does not trust runs in a host process instead (:mod:`.remote`),
whose deadline no code of the target's can dodge. Every call into an in-process target
(constructor, ``add_request``, ``schedule``, ``update_from_output``, a learner's
``allocate_kv_pages``) runs under a wall-clock deadline. On the main thread of a POSIX
process a ``SIGALRM`` interrupts the call: the target's Python code stops where it loops, and the
call raises :class:`CallTimeout`, which the engine turns into a PROTO-1 finding that names the call
and the iteration. The interrupt is raised as a ``BaseException`` inside the target so that a
target's own ``except Exception`` cannot swallow it.

Code stuck where signals are not delivered (inside a C extension, or off the main thread), or
that catches ``BaseException``, is out of its reach: only a host process can be stopped for sure.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, TypeVar

from kvsched.checks.targets.learner import LearnerScheduler
from kvsched.reference.engine import Foreseeing
from kvsched.spec.protocol import (
    ModelOutput,
    ScheduledBatch,
    Scheduler,
    SchedulerFactory,
    StepOutcome,
)
from kvsched.spec.workload import Limits, Request

T = TypeVar("T")


class CallTimeout(Exception):
    """A call into the target did not return within its deadline."""


class TargetExit(Exception):
    """The target called ``sys.exit()``, or raised a ``BaseException`` of its own, in a call."""


class DeadlineExpired(BaseException):
    """Raised inside the target by the alarm; BaseException so ``except Exception`` misses it.

    Code that catches ``BaseException`` around target code (loading it, say) must let it pass.
    """


class Deadline:
    """Runs calls into the target under a wall-clock limit of ``seconds`` each."""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"a deadline must be positive, got {seconds}")
        self.seconds = seconds
        self.context = ""
        """Where the check is ("workload 'teaching', static policy"), added to timeout messages."""
        self.expired = False
        """Whether a call has timed out; later calls then get :attr:`after_expiry` seconds."""
        self._armed = False

    @property
    def after_expiry(self) -> float:
        # Once a target has hung, every shrinking step that hangs again would cost the full
        # deadline; the small workloads shrinking tries answer in milliseconds when they answer.
        return min(self.seconds, 0.25)

    def call(self, label: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)``, or :class:`CallTimeout` once the deadline passes."""
        where = f"{label} on {self.context}" if self.context else label
        try:
            if self._armed or not _alarm_available():
                return function(*args, **kwargs)  # a nested call, or no signals to use
            return self._call_with_alarm(where, function, *args, **kwargs)
        except SystemExit as exit_:  # the target's sys.exit() ends its answer, not kvsched
            raise TargetExit(f"{where} called sys.exit({exit_.code!r})") from None
        except (Exception, KeyboardInterrupt, DeadlineExpired):
            raise  # the engine judges the target's exceptions; Ctrl-C stops the check
        except BaseException as error:  # a BaseException of the target's own is still its answer
            raise TargetExit(f"{where} raised {type(error).__name__}: {error}") from None

    def _call_with_alarm(
        self, where: str, function: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        def expire(signum: int, frame: FrameType | None) -> None:
            if self._armed:  # the call may have returned just as the timer fired
                raise DeadlineExpired

        previous = signal.signal(signal.SIGALRM, expire)
        seconds = self.after_expiry if self.expired else self.seconds
        note = f", shortened from {self.seconds:g} s after a first hang" if self.expired else ""
        self._armed = True
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return function(*args, **kwargs)
        except DeadlineExpired:
            self.expired = True
            raise CallTimeout(
                f"{where} did not return within {seconds:g} s{note} (the scheduler hangs or is "
                "far too slow)"
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._armed = False
            signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)

    def factory(self, factory: SchedulerFactory) -> SchedulerFactory:
        """``factory`` with its construction and every protocol call under this deadline."""

        def build(limits: Limits) -> Scheduler:
            inner = self.call("the constructor", factory, limits)
            return DeadlineScheduler(inner, self)

        return build


class DeadlineScheduler(Foreseeing):
    """A scheduler whose every protocol call runs under a :class:`Deadline`."""

    def __init__(self, inner: Scheduler, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline
        self._iteration = 1

    def foresee(self, joining: Mapping[int, Sequence[Request]], last: int) -> None:
        # Passed on to kvsched's own learner adapter only: a scheduler under test, even one
        # that derives from Foreseeing itself, is never told the arrivals ahead.
        if isinstance(self._inner, LearnerScheduler):
            self._inner.foresee(joining, last)

    def add_request(self, request: Request) -> None:
        label = f"add_request({request.id!r}) before iteration {self._iteration}"
        self._deadline.call(label, self._inner.add_request, request)

    def schedule(self) -> ScheduledBatch:
        label = f"schedule() in iteration {self._iteration}"
        return self._deadline.call(label, self._inner.schedule)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        label = f"update_from_output() in iteration {self._iteration}"
        try:
            return self._deadline.call(label, self._inner.update_from_output, output)
        finally:
            self._iteration += 1


def _alarm_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
