"""``kvsched import LAYOUT FILE -o WORKLOAD``: a public trace as a kvsched workload file.

The rules are :mod:`kvsched.reference.traces`'s, and docs/traces.md states them; the help
repeats them. A row that cannot be used exits 2, naming the file, the line and the column.
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from kvsched.commands import UsageError
from kvsched.commands.output import emit, writing
from kvsched.reference.traces import DEFAULT_LIMITS, LAYOUTS, ImportOptions, import_trace
from kvsched.reference.traces.convert import DEFAULT_ARRIVAL_SCALE, MOONCAKE_BLOCK
from kvsched.spec.bounds import LIMIT_FIELDS, MAX_REQUESTS
from kvsched.spec.workload import Limits, workload_to_json

RULES = """\
rules, in order (docs/traces.md):
  failed rows   a row with 0 output tokens (BurstGPT's failed responses) is dropped and counted
  selection     the earliest --max-requests rows by arrival are kept, ties in file order; the
                file need not be sorted (Mooncake's are not), and every row is still checked
  time          arrivals are rebased to the first kept one; Azure's wall-clock times (7
                fractional digits, with or without them), BurstGPT's and vidur's seconds and
                Mooncake's milliseconds are read exactly; the elapsed seconds over --rate,
                cut into iterations of --arrival-scale seconds (rounded down), is the arrival
  no times      --poisson RATE puts the rows, in file order, on a seeded Poisson process of RATE
                requests per second (needed for vidur's length-only files, ShareGPT-like mixes)
  clipping      a request holds at most --max-model-len tokens: the output is cut to it (and to
                100,000), then the prompt to what is left, from its end; clipped requests and
                tokens are counted
  prefixes      Mooncake's hash_ids (one per --hash-block tokens) become prefix groups: shared
                whole blocks only, never a hit the trace does not show
  ids           each request is named by its line: L2, L3, ...
every count is printed and repeated in the workload's description."""


def register(subparsers: Any) -> None:
    layouts = "; ".join(f"{name}: {layout.source}" for name, layout in LAYOUTS.items())
    parser = subparsers.add_parser(
        "import",
        help="read a public trace (Azure, BurstGPT, Mooncake, vidur) into a workload file",
        description=f"Read FILE in LAYOUT and write the workload it makes. Layouts: {layouts}.",
        epilog=RULES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("layout", choices=tuple(LAYOUTS), metavar="LAYOUT", help="the layout")
    parser.add_argument("file", type=Path, help="the trace file")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the workload file to write")
    limits = parser.add_argument_group("limits of the workload")
    limits.add_argument("--batch-limit", type=int, default=DEFAULT_LIMITS.batch_limit)
    limits.add_argument("--page-size", type=int, default=DEFAULT_LIMITS.page_size)
    limits.add_argument("--pool-pages", type=int, default=DEFAULT_LIMITS.pool_pages)
    limits.add_argument(
        "--max-model-len",
        type=int,
        default=0,
        metavar="TOKENS",
        help="most tokens a request holds, prompt and output (default: the pool's, pool pages x "
        "page size, so every request fits)",
    )
    time = parser.add_argument_group("time")
    time.add_argument(
        "--arrival-scale",
        type=_positive,
        default=DEFAULT_ARRIVAL_SCALE,
        metavar="SECONDS",
        help=f"seconds of trace per iteration (default {DEFAULT_ARRIVAL_SCALE})",
    )
    time.add_argument(
        "--rate",
        type=_positive,
        default=Decimal(1),
        metavar="FACTOR",
        help="arrival-rate factor: 2 halves every gap between arrivals (default 1)",
    )
    time.add_argument(
        "--poisson",
        type=_positive,
        metavar="RATE",
        help="seeded Poisson arrivals of RATE requests per second instead of the trace's times",
    )
    time.add_argument("--seed", type=int, default=0, help="the --poisson seed (default 0)")
    parser.add_argument(
        "--max-requests",
        type=int,
        default=MAX_REQUESTS,
        metavar="N",
        help=f"keep the N earliest usable rows (default and most: {MAX_REQUESTS:,})",
    )
    parser.add_argument(
        "--hash-block",
        type=int,
        default=MOONCAKE_BLOCK,
        metavar="TOKENS",
        help=f"tokens per Mooncake hash_ids block (default {MOONCAKE_BLOCK})",
    )
    parser.add_argument("--name", default="", help="the workload's name (default: FILE's stem)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    options = options_from(args)
    workload, report = import_trace(args.layout, args.file, options)
    with writing(f"--out {args.out}"):
        from kvsched.checks.verdict.files import write_file

        write_file(args.out, json.dumps(workload_to_json(workload), indent=1) + "\n")
    emit("\n".join([f"wrote {args.out}: {args.file} read as {args.layout}", *report.lines()]))
    return 0


def options_from(args: argparse.Namespace) -> ImportOptions:
    """The import's options; UsageError (exit 2) for one out of range."""
    values = {}
    for field, (low, high) in LIMIT_FIELDS.items():
        value = getattr(args, field)
        if not low <= value <= high:
            option = "--" + field.replace("_", "-")
            raise UsageError(f"{option} must be within {low}..{high}, got {value}")
        values[field] = value
    limits = Limits(**values)
    capacity = limits.pool_pages * limits.page_size
    if not 0 <= args.max_model_len <= capacity:
        raise UsageError(
            f"--max-model-len must be within 1..{capacity} (pool pages x page size: a longer "
            f"request could never be admitted), got {args.max_model_len}"
        )
    if not 1 <= args.max_requests <= MAX_REQUESTS:
        raise UsageError(
            f"--max-requests must be within 1..{MAX_REQUESTS}, got {args.max_requests}"
        )
    if args.hash_block < 1:
        raise UsageError(f"--hash-block must be >= 1 token, got {args.hash_block}")
    return ImportOptions(
        limits=limits,
        max_model_len=args.max_model_len,
        arrival_scale=args.arrival_scale,
        rate=args.rate,
        poisson=args.poisson,
        seed=args.seed,
        max_requests=args.max_requests,
        block_tokens=args.hash_block,
        name=args.name,
    )


def _positive(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value
