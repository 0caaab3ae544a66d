"""The limits on a target kvsched runs in a host process, as command-line options.

``kvsched check`` and ``kvsched report --policies NAME=TARGET`` both run third-party code in a
separate process (kvsched.checks.targets) and take the same options for its limits, so a
hanging or hostile class meets the same deadline and the same memory and output caps in both.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvsched.checks.targets.sandbox import SANDBOXES
from kvsched.commands import UsageError

if TYPE_CHECKING:
    from kvsched.checks.targets.confinement import Confinement


def add_limit_options(parser: Any, command: str, budget: float | None = 600.0) -> None:
    """The ``--timeout``, ``--budget``, ``--memory-mb``, ``--scratch-mb``, ``--output-limit``
    and ``--sandbox`` options; ``command`` names what the budget covers in their help.
    ``budget`` None leaves ``args.budget`` None unless given: the command chooses it (check: by
    the profile)."""
    limits = parser.add_argument_group(
        "limits on the target",
        "The target runs in a separate process that kvsched starts, watches and kills; a target "
        "that breaks a limit gets a PROTO-1 verdict (docs/grading.md).",
    )
    limits.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds one call into the target (or its import) may take; default 10",
    )
    default = "the profile's" if budget is None else f"{budget:g}"
    limits.add_argument(
        "--budget",
        type=float,
        default=budget,
        metavar="SECONDS",
        help=f"wall-clock seconds for the whole {command} of a target, kvsched's own work "
        f"included; default {default}",
    )
    limits.add_argument(
        "--memory-mb",
        type=int,
        default=2048,
        metavar="MIB",
        help="memory of the target, in MiB: each process's address space, and what all its "
        "processes hold together; default 2048",
    )
    limits.add_argument(
        "--scratch-mb",
        type=int,
        default=256,
        metavar="MIB",
        help="what the target's scratch folder (its HOME and TMPDIR) may hold, in MiB; default 256",
    )
    limits.add_argument(
        "--output-limit",
        type=int,
        default=16 * 1024 * 1024,
        metavar="BYTES",
        help="bytes the target may write to stdout and stderr together; default 16 MiB",
    )
    limits.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="auto",
        help="where the target's process runs: auto (default) takes the strongest the kernel "
        "allows; bwrap: bubblewrap, its own PID, mount and network namespaces, only a scratch "
        "folder writable; uid (as root): a user id of its own; none: kvsched's own user",
    )
    limits.add_argument(
        "--require-sandbox",
        action="store_true",
        help="refuse (exit 2) to run the target where no containment is available",
    )


def confinement_from(args: argparse.Namespace, ask: bool = True) -> Confinement:
    """The limits the options ask for; UsageError (exit 2) for one out of range. ``ask``: which
    containment they get is asked now (:func:`contained`); a caller that may run no target's
    code (an event log's check) asks once it knows."""
    from kvsched.checks.targets.confinement import Confinement

    for option, value in (("--timeout", args.timeout), ("--budget", args.budget)):
        if not value > 0 or value == float("inf"):
            raise UsageError(f"{option} must be a positive number of seconds, got {value}")
    if args.memory_mb < 64:
        raise UsageError(f"--memory-mb must be at least 64 (Python needs it), got {args.memory_mb}")
    if args.scratch_mb < 1:
        raise UsageError(f"--scratch-mb must be at least 1, got {args.scratch_mb}")
    if args.output_limit < 0:
        raise UsageError(f"--output-limit must be >= 0 bytes, got {args.output_limit}")
    required = bool(getattr(args, "require_sandbox", False))
    if required and args.sandbox == "none":
        raise UsageError("--require-sandbox contradicts --sandbox none; leave one out")
    confinement = Confinement(
        args.timeout,
        args.budget,
        args.memory_mb,
        args.output_limit,
        args.sandbox,
        required,
        args.scratch_mb,
    )
    return contained(confinement) if ask else confinement


def contained(confinement: Confinement) -> Confinement:
    """``confinement``, its containment asked now, so that a refusal is exit 2 before any work.
    Asking starts a jailed Python once (checks/targets/sandbox.py), so it is asked only where a
    target's code is to run."""
    from kvsched.checks.targets.sandbox import SandboxUnavailable

    try:
        confinement.containment()
    except SandboxUnavailable as error:
        raise UsageError(str(error)) from None
    return confinement
