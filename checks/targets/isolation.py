"""Run a check in a child process, so that nothing a target does can hang or kill kvsched.

The per-call deadlines of :mod:`.deadline` turn a looping target into a PROTO-1 finding. What they
cannot interrupt (a target stuck inside a C extension, one that catches ``BaseException``, one
that calls ``os._exit``) is caught here: the check runs in a forked child, the parent watches the
child's :class:`~.deadline.Watch`, and ends the child when one call into the target has run well
past its deadline. The parent then reports :class:`Stuck` or :class:`Died`, which the caller turns
into a finding; a bug of kvsched inside the child comes back as :class:`ChildCrash`.
"""

from __future__ import annotations

import multiprocessing
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Generic, TypeVar

from kvsched.checks.targets.deadline import Watch

T = TypeVar("T")

_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Stuck:
    """The target did not return from a call and could not be interrupted."""

    doing: str
    seconds: float


@dataclass(frozen=True)
class Died:
    """The child process ended without a result: the target exited or crashed the interpreter."""

    doing: str
    exitcode: int | None


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


class ChildCrash(RuntimeError):
    """kvsched itself failed inside the child; the message carries the child's traceback."""


def isolation_available() -> bool:
    """Forking is what keeps an already loaded target (a file, a class) usable in the child."""
    return sys.platform != "win32" and "fork" in multiprocessing.get_all_start_methods()


def run_isolated(job: Callable[[Watch], T], stall_seconds: float) -> Done[T] | Stuck | Died:
    """``job(watch)`` in a forked child; :class:`Stuck` once one call runs ``stall_seconds``."""
    context = multiprocessing.get_context("fork")
    watch = Watch()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(job, watch, sender), daemon=True)
    child.start()
    sender.close()  # the parent keeps only its reading end, so EOF means the child is gone
    try:
        while True:
            if receiver.poll(_POLL_SECONDS):
                try:
                    status, payload = receiver.recv()
                except EOFError:
                    child.join()
                    return Died(watch.label, child.exitcode)
                child.join()
                if status == "crash":
                    raise ChildCrash(str(payload))
                return Done(payload)
            if not child.is_alive():
                child.join()
                if receiver.poll(0):
                    continue  # the result arrived as the child ended
                return Died(watch.label, child.exitcode)
            stalled = watch.stalled_for()
            if stalled > stall_seconds:
                child.kill()
                child.join()
                return Stuck(watch.label, stalled)
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
            child.join()


def _child_main(job: Callable[[Watch], object], watch: Watch, sender: Connection) -> None:
    try:
        result = job(watch)
    except BaseException:  # a bug of ours: send it to the parent instead of dying silently
        sender.send(("crash", traceback.format_exc()))
    else:
        sender.send(("ok", result))
    finally:
        sender.close()
