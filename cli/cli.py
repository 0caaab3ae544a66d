"""The ``kvsched`` command line: one subcommand per module of :mod:`kvsched.commands`.

Exit codes: :class:`kvsched.spec.vocabulary.ExitCode`. Whatever ends a command other than its
verdict ends it with one line on stderr and an exit code of its own, never 0: a bug of kvsched
itself exits 3 with a short report instead of a bare traceback, so it is never mistaken for a
verdict on the scheduler; a verdict that could not be written whole (a closed pipe, a full disk,
``ulimit -f``) exits 5; SIGINT (Ctrl-C) and SIGTERM exit 130 and 143, once the ``finally``
blocks on the way out have ended the target's host process. Interrupts always win: a signal
received decides the exit code whatever the command returned (:class:`_Stop`), and a watchdog
thread interrupts Z3 and ends kvsched if the unwinding has not within :data:`GRACE_SECONDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from types import FrameType
from typing import Any, TextIO

from kvsched.commands import UsageError
from kvsched.commands.output import STDOUT, OutputFailure, printing
from kvsched.spec.text import escaped
from kvsched.spec.vocabulary import ExitCode
from kvsched.spec.workload import WorkloadError

# Each module defines ``register(subparsers)``, which adds its parser and sets ``func``.
COMMANDS = (
    "replay",
    "reconstruct",
    "report",
    "check",
    "record",
    "mutants",
    "bench",
    "prove",
    "synth",
    "import_trace",
    "sweep",
    "init",
    "figure2",
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt: every layer that
    lets Ctrl-C through (the deadlines, the target loader, Hypothesis) lets this through too, and
    every ``finally`` on the way out runs, among them the one that kills the target's host."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With ``command``, a name of :data:`COMMANDS` that its module
    registers its command under, the parser of that command alone: the same parser for any
    arguments that start with that name, without importing the other commands' modules (about
    0.12 to 0.17 s of CPU where their bytecode is not cached, ``time.process_time`` around the
    imports, which a learner's check would pay on every run). Otherwise every command's."""
    if command is not None and command in COMMANDS:
        parser, subparsers = _parser()
        _register(command, subparsers)
        if command in subparsers.choices:
            return parser
    parser, subparsers = _parser()
    for name in COMMANDS:
        _register(name, subparsers)
    return parser


def _parser() -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(
        prog="kvsched",
        description="Verify and benchmark schedulers of LLM-serving engines (paged KV cache, "
        "static and continuous batching).",
    )
    parser.add_argument("--version", action="version", version=f"kvsched {version('kvsched')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    return parser, subparsers


def _register(name: str, subparsers: Any) -> None:
    importlib.import_module(f"kvsched.commands.{name}").register(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    with _signals() as stop:
        try:
            code = _run(argv, stop)
            stop.raising = False
        except KeyboardInterrupt:  # the signal landed outside the command's own handlers
            stop.raising = False
            code = ExitCode.INTERRUPTED
    if stop.received:
        _solvers_usable_again()
    # Settled once the handlers are restored: a signal that comes later meets the interpreter's
    # own handling (SIGTERM kills, SIGINT raises), not a handler that only notes it.
    return stop.settle(code)


def _run(argv: Sequence[str] | None, stop: _Stop) -> int:
    try:
        arguments = sys.argv[1:] if argv is None else list(argv)
        named = arguments[0] if arguments else None
        parser = build_parser() if named not in COMMANDS else build_parser(named)
        args = parser.parse_args(arguments)
        stop.command = args.command
        code = int(args.func(args))
        with printing():  # a print outside a command's guarded output is flushed here
            pass
        return code
    except OutputFailure as failure:
        if not stop.received:
            _tell(f"kvsched {stop.command}: {failure}")
        if failure.what == STDOUT:
            _silence(sys.stdout)
        return ExitCode.WRITE_FAILED
    except KeyboardInterrupt:  # the signal's own line is :meth:`_Stop.settle`'s
        return ExitCode.INTERRUPTED
    except Exception as error:
        if stop.received:
            # What fails once a signal came is the signal's doing (Z3 interrupted between two
            # checks answers the next push with "push canceled"): its line says it all.
            return ExitCode.INTERRUPTED
        if isinstance(error, (UsageError, WorkloadError)):
            _tell(f"kvsched {stop.command}: {error}")
            return ExitCode.USAGE
        _tell(
            f"kvsched {stop.command}: internal error (a bug in kvsched, not a finding about "
            "the scheduler under test). Please report it with this trace:",
            trace=True,
        )
        return ExitCode.INTERNAL


GRACE_SECONDS = 0.8
"""How long the ``finally`` blocks get to unwind after a signal before kvsched exits anyway."""


class _Stop:
    """The signals a command received, and the one line that says so.

    Whatever the command returns, a signal received decides the exit code (:meth:`settle`): a
    KeyboardInterrupt that some layer caught and turned into an answer, or a verdict that was
    finishing as the signal came, must never exit 0.
    """

    def __init__(self) -> None:
        self.command = "?"
        self.received: list[int] = []
        self.raising = True
        """Whether the first signal raises where the program is; off once the command is over."""
        self.delivered = False
        """Whether a KeyboardInterrupt is on its way: later signals are only noted."""
        self.lost = False
        """Whether the KeyboardInterrupt was lost in a finalizer, and the signal raised again."""
        self._said = threading.Lock()

    def settle(self, code: int) -> int:
        """``code``, unless a signal came (or a KeyboardInterrupt ended the command): then the
        signal's own code, with its line."""
        if not self.received and code != ExitCode.INTERRUPTED:
            return code
        signum = self.received[0] if self.received else signal.SIGINT
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except (OSError, ValueError):
            _silence(sys.stdout)
        return self.last_word(signum)

    def last_word(self, signum: int) -> int:
        """Say which signal ended the command, once, and return its exit code. The watchdog and
        :meth:`settle` may both get here; the second waits (the first is exiting)."""
        self._said.acquire()
        terminated = signum == signal.SIGTERM
        how = "terminated (SIGTERM)" if terminated else "interrupted (SIGINT, Ctrl-C)"
        _tell(f"kvsched {self.command}: {how}; no verdict")
        return ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED

    def watch(self, wakeup: int) -> None:
        """The watchdog: a thread that hears a signal the moment it comes, through the
        interpreter's wakeup fd, even while the main thread is inside a C call that does not
        return to Python (Z3's solver), which it interrupts. If the command has not ended
        within :data:`GRACE_SECONDS` (a layer swallowed the KeyboardInterrupt, or a call does
        not return), kvsched exits with the signal's code from here; the target's host dies
        with it (PR_SET_PDEATHSIG, sandbox.py). The command is over when the write end of the
        wakeup pipe closes; the read end stays open till then, as a write to a pipe nobody
        reads would be reported on stderr."""
        signums: list[int] = []
        ends = math.inf
        while (left := ends - time.monotonic()) > 0:
            ready, _, _ = select.select([wakeup], [], [], min(left, _TICK) if signums else None)
            if ready:
                woken = os.read(wakeup, 64)
                if not woken:  # the command is over
                    os.close(wakeup)
                    return
                if not signums and (signums := [n for n in woken if n in STOPPING]):
                    ends = time.monotonic() + GRACE_SECONDS
                    with contextlib.suppress(Exception):  # whatever Z3 does, the deadline holds
                        _interrupt_solvers()
            if self.lost and self.raising:  # the KeyboardInterrupt died in a finalizer: again
                signal.pthread_kill(threading.main_thread().ident or 0, signums[0])
        os._exit(self.last_word(signums[0]))


_TICK = 0.05
"""How often the watchdog looks whether the KeyboardInterrupt must be raised again."""

STOPPING = (signal.SIGINT, signal.SIGTERM)


def _interrupt_solvers() -> None:
    """Cancel the Z3 check under way, if z3 is loaded: its C solver does not return to Python,
    where the KeyboardInterrupt waits, until it is done. Z3's own Ctrl-C handler, which would
    swallow SIGINT as an ``unknown``, is off (checks/proofs/query.py)."""
    z3 = sys.modules.get("z3")
    if z3 is not None:
        z3.main_ctx().interrupt()


def _solvers_usable_again() -> None:
    """Clear the cancellation :func:`_interrupt_solvers` leaves on Z3's context, which would
    refuse the next ``push`` of whoever calls ``main`` again in this process (a test, an
    embedding program): a check clears it, so an empty one is run."""
    z3 = sys.modules.get("z3")
    if z3 is not None:
        for _ in range(2):  # the first may raise the error a refused call left behind
            with contextlib.suppress(Exception):
                z3.Solver().check()
                return


@contextlib.contextmanager
def _signals() -> Iterator[_Stop]:
    """SIGINT and SIGTERM raise (once) and wake the watchdog, SIGXFSZ is ignored; all restored
    on leaving.

    A second signal while the first unwinds is noted and dropped: raised inside a ``finally``
    it would cut short the cleanup that kills the target's host. SIGXFSZ's default action would
    kill kvsched mid-write at ``ulimit -f``; ignored, the write fails with EFBIG, which is
    reported. The interpreter ignores it at start-up already, but not when embedded without its
    signal handlers, so it is not left to chance.
    Signals a parent ignores (SIG_IGN, as for a background job) stay ignored. Handlers can only
    be set from the main thread; elsewhere the caller's stand.
    """
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.lost:  # raised again by the watchdog (see ``dropped``), not a new signal
            stop.lost = False
        else:
            stop.received.append(signum)
        if stop.raising and not stop.delivered:
            stop.delivered = True
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    def dropped(unraisable: Any) -> None:
        """Where the handler ran inside a finalizer (``__del__``, as z3's objects have) or a C
        callback, its KeyboardInterrupt cannot get out: the interpreter would print it as
        "Exception ignored in ..." with a traceback, and the command would go on. The watchdog
        raises it again instead, from outside (raised from here, it would die here too)."""
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and stop.received):
            previous_hook(unraisable)
        elif stop.raising:
            stop.delivered, stop.lost = False, True

    wanted: dict[int, Any] = {signal.SIGINT: handle, signal.SIGTERM: handle}
    if hasattr(signal, "SIGXFSZ"):
        wanted[signal.SIGXFSZ] = signal.SIG_IGN
    previous = {}
    for number, handler in wanted.items():
        current = signal.getsignal(number)
        if current is signal.SIG_IGN and handler is handle:
            continue
        previous[number] = signal.signal(number, handler)
    wakeup, woken = os.pipe()
    os.set_blocking(woken, False)
    previous_wakeup = signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    previous_hook, sys.unraisablehook = sys.unraisablehook, dropped
    watchdog = threading.Thread(
        target=stop.watch, args=(wakeup,), name="kvsched-signals", daemon=True
    )
    watchdog.start()
    try:
        yield stop
    finally:
        sys.unraisablehook = previous_hook
        signal.set_wakeup_fd(previous_wakeup)
        os.close(woken)  # the watchdog reads the end of the pipe and leaves
        # Waited for, so that nothing it does for a signal (cancelling Z3's context) lands
        # after ``main`` has made the solvers usable again for whoever calls it next.
        watchdog.join(timeout=2 * GRACE_SECONDS)
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


def _tell(message: str, trace: bool = False) -> None:
    """One message on stderr; if stderr itself cannot be written, the exit code still says it."""
    try:
        print(escaped(message), file=sys.stderr)  # it may name the target's file
        if trace:
            traceback.print_exc()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        _silence(sys.stderr)


def _silence(stream: TextIO | None) -> None:
    """Point a stream that failed at /dev/null: the interpreter flushes at exit what the failed
    write left in its buffer, and that second failure would print "Exception ignored ..." and
    turn the exit code into 120 (the recipe of the Python docs' note on SIGPIPE)."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):  # a stand-in stream (tests): nothing to flush
        return
    if fd < 0:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
