"""``kvsched sweep GRID``: run every cell of a grid file, check and measure each, merge, gate.

Cells run on a local process pool (``--jobs``) or, with ``--cluster ADDRESS``, on a Dask
distributed scheduler, one task per cell. Each finished cell is stored under ``--out``, keyed by
its definition, so a rerun after an interruption runs only the missing cells. Writes
``OUT/sweep.json`` and prints the table; exits 1 when any cell has a finding, 2 on an invalid
grid (naming the file, the key and what is wrong).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from kvsched.checks.verdict.files import write_file
from kvsched.commands import UsageError
from kvsched.commands.output import OutputFailure, emit, writing
from kvsched.spec.vocabulary import ExitCode

DEFAULT_OUT = "sweeps"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of schedulers x workloads x seeds x limits, checked and measured; gate",
        description="Run every cell of GRID (a TOML file, docs/sweeps.md) under the runtime "
        "monitor, store each cell's result under OUT/cells, write OUT/sweep.json and print the "
        "table. Finished cells are skipped. Exit 1 if any cell has a finding.",
    )
    parser.add_argument("grid", metavar="GRID", help="the grid file (TOML)")
    parser.add_argument(
        "--out",
        help=f"the sweep's folder (default: {DEFAULT_OUT}/ followed by the grid file's name)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="local worker processes (default 1: cells run in this process)",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="a Dask distributed scheduler (tcp://HOST:PORT): one task per cell, instead of the "
        "local pool; needs pip install 'kvsched[cluster]'",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kvsched.reports.sweep import (
        ClusterError,
        GridError,
        StoreFailure,
        load_grid,
        merged,
        render_table,
        report_json,
        sweep,
    )

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.cluster is not None and args.jobs != 1:
        raise UsageError("--jobs is the local pool's; with --cluster the cluster's workers run")
    path = Path(args.grid)
    out = Path(args.out) if args.out else Path(DEFAULT_OUT) / path.stem
    try:
        grid = load_grid(path)
        results = sweep(grid, out, sys.stderr, jobs=args.jobs, cluster=args.cluster)
    except (GridError, ClusterError) as error:
        raise UsageError(str(error)) from None
    except StoreFailure as failure:
        raise OutputFailure(str(failure.path), failure.error) from None
    report = merged(os.fspath(path), results)
    data = report_json(report)
    report_path = out / "sweep.json"
    with writing(str(report_path)):
        write_file(report_path, data)
    emit(data.decode().rstrip("\n") if args.format == "json" else render_table(report))
    if args.format == "table":
        print(f"kvsched sweep: wrote {report_path}", file=sys.stderr)
    return ExitCode.FINDING if report.findings else ExitCode.OK
