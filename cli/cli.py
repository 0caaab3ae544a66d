"""The ``kvsched`` command line: one subcommand per module of :mod:`kvsched.commands`.

Exit codes: :class:`kvsched.spec.vocabulary.ExitCode`. A bug of kvsched itself exits 3 with a
short report instead of a bare traceback, so it is never mistaken for a verdict on the scheduler.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from kvsched.commands import UsageError
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
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvsched",
        description="Verify and benchmark schedulers of LLM-serving engines (paged KV cache, "
        "static and continuous batching).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"kvsched.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (UsageError, WorkloadError) as error:
        print(f"kvsched {args.command}: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except BrokenPipeError:
        return ExitCode.OK
    except Exception:
        print(
            f"kvsched {args.command}: internal error (a bug in kvsched, not a finding about "
            "the scheduler under test). Please report it with this trace:",
            file=sys.stderr,
        )
        traceback.print_exc()
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
