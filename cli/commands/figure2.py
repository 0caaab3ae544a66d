"""``kvsched figure2``: the vLLM paper's Figure 2, reproduced on a ShareGPT-like workload.

Runs the reservation family (``kvsched.reference.reservation``) on one seeded workload and
prints the report section, ours beside the paper's (docs/figure2.md); ``--out DIR`` writes it
as ``report.md`` and a self-contained ``report.html`` too. Bad arguments exit 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from kvsched.commands import UsageError
from kvsched.commands.output import emit, writing

DEFAULT_REQUESTS = 1000


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "figure2",
        help="reproduce the vLLM paper's Figure 2: KV memory under Orca's reservations and paging",
        description="Run Orca (Max), Orca (Pow2), Orca (Oracle) with a buddy allocator and vLLM's "
        "paging on a seeded ShareGPT-like workload, and print the share of KV memory holding "
        "token states, reservation, internal fragmentation and the rest, beside the paper's.",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=DEFAULT_REQUESTS,
        help=f"requests in the workload (default {DEFAULT_REQUESTS})",
    )
    parser.add_argument("--seed", type=int, default=0, help="the workload's seed (default 0)")
    parser.add_argument(
        "--out", type=Path, help="also write OUT/report.md and OUT/report.html (self-contained)"
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.requests < 1:
        raise UsageError(f"--requests: must be a positive integer, got {args.requests}")
    if args.seed < 0:
        raise UsageError(f"--seed: must be a non-negative integer, got {args.seed}")
    from kvsched.checks.verdict.files import write_file
    from kvsched.reference.reservation import measure
    from kvsched.reference.sharegpt import sharegpt_like
    from kvsched.reports.figure2 import figure2_section
    from kvsched.reports.render import to_html, to_markdown
    from kvsched.spec.vllm_paper import TOKEN_SLOTS
    from kvsched.spec.vocabulary import RESERVATIONS

    workload = sharegpt_like(args.requests, args.seed, TOKEN_SLOTS)
    runs = [measure(reservation, workload) for reservation in RESERVATIONS]
    idle = [run.reservation for run in runs if run.iterations == 0]
    if idle:
        raise UsageError(
            f"--requests {args.requests}: under {idle[0]} no request ever waited, so the pool "
            f"was never under full demand and there is nothing to measure; give more requests "
            f"(default {DEFAULT_REQUESTS})"
        )
    command = shlex.join(["kvsched", "figure2", *_options(args)])
    blocks = figure2_section(workload, runs, command)
    text = to_markdown(blocks)
    if args.out is not None:
        with writing(f"--out {args.out}"):
            args.out.mkdir(parents=True, exist_ok=True)
            write_file(args.out / "report.md", text)
            write_file(
                args.out / "report.html", to_html(blocks, "kvsched: the vLLM paper's Figure 2")
            )
        print(f"wrote {args.out / 'report.md'} and report.html", file=sys.stderr)
    emit(text.rstrip("\n"))
    return 0


def _options(args: argparse.Namespace) -> list[str]:
    """The options that differ from the defaults, as the command that reruns this one."""
    options = []
    if args.requests != DEFAULT_REQUESTS:
        options += ["--requests", str(args.requests)]
    if args.seed != 0:
        options += ["--seed", str(args.seed)]
    return options
