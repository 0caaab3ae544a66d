"""The ``kvsched`` command line: one subcommand per module of :mod:`kvsched.commands`.

Exit codes: :class:`kvsched.spec.vocabulary.ExitCode`. Whatever ends a command other than its
verdict ends it with one line on stderr and an exit code of its own, never 0: a bug of kvsched
itself exits 3 with a short report instead of a bare traceback, so it is never mistaken for a
verdict on the scheduler; a verdict that could not be written whole (a closed pipe, a full disk,
``ulimit -f``) exits 5; SIGINT (Ctrl-C) and SIGTERM exit 130 and 143, once the ``finally``
blocks on the way out have ended the target's host process.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvsched",
        description="Verify and benchmark schedulers of LLM-serving engines (paged KV cache, "
        "static and continuous batching).",
    )
    parser.add_argument("--version", action="version", version=f"kvsched {version('kvsched')}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"kvsched.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    command = "?"
    with _signals() as received:
        try:
            args = build_parser().parse_args(argv)
            command = args.command
            code = int(args.func(args))
            with printing():  # a print outside a command's guarded output is flushed here
                pass
            return code
        except OutputFailure as failure:
            _tell(f"kvsched {command}: {failure}")
            if failure.what == STDOUT:
                _silence(sys.stdout)
            return ExitCode.WRITE_FAILED
        except KeyboardInterrupt:
            terminated = signal.SIGTERM in received
            how = "terminated (SIGTERM)" if terminated else "interrupted (SIGINT, Ctrl-C)"
            _tell(f"kvsched {command}: {how}; no verdict")
            try:
                if sys.stdout is not None:
                    sys.stdout.flush()
            except (OSError, ValueError):
                _silence(sys.stdout)
            return ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED
        except (UsageError, WorkloadError) as error:
            _tell(f"kvsched {command}: {error}")
            return ExitCode.USAGE
        except Exception:
            _tell(
                f"kvsched {command}: internal error (a bug in kvsched, not a finding about "
                "the scheduler under test). Please report it with this trace:",
                trace=True,
            )
            return ExitCode.INTERNAL


@contextlib.contextmanager
def _signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM raise (the first only), SIGXFSZ is ignored; all restored on leaving.

    A second signal while the first unwinds is noted and dropped: raised inside a ``finally``
    it would cut short the cleanup that kills the target's host. SIGXFSZ's default action would
    kill kvsched mid-write at ``ulimit -f``; ignored, the write fails with EFBIG, which is
    reported. The interpreter ignores it at start-up already, but not when embedded without its
    signal handlers, so it is not left to chance.
    Signals a parent ignores (SIG_IGN, as for a background job) stay ignored. Handlers can only
    be set from the main thread; elsewhere the caller's stand.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    wanted: dict[int, Any] = {signal.SIGINT: stop, signal.SIGTERM: stop}
    if hasattr(signal, "SIGXFSZ"):
        wanted[signal.SIGXFSZ] = signal.SIG_IGN
    previous = {}
    for number, handler in wanted.items():
        current = signal.getsignal(number)
        if current is signal.SIG_IGN and handler is stop:
            continue
        previous[number] = signal.signal(number, handler)
    try:
        yield received
    finally:
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
