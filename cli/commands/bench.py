"""``kvsched bench``: run the asv suite on two commits and gate on the deterministic figures.

With asv 0.6.6 and no network, ``asv continuous`` cannot do this (it refuses an existing
environment), so the command does it step by step, in a temporary folder (library code in
:mod:`kvsched.reports.bench`):

1. a throwaway clone of the repository (``git clone --shared``: the repository is only read). The
   candidate is a commit, or by default the working tree, committed in the clone;
2. each commit exported (``git archive``) and laid out as the package ``kvsched`` the way its
   ``pyproject.toml`` maps folders to subpackages: no build, no download;
3. ``asv machine --yes``, then per commit ``asv run --python=same --set-commit-hash=COMMIT`` with
   ``ASV_PYTHONPATH`` at that commit's kvsched (asv drops ``PYTHONPATH``). The suite run on both
   is the candidate's ``benchmarks/``;
4. ``asv compare``, which always exits 0, so the gate reads the table it prints.

The gate looks only at the ``track_*`` figures of ``benchmarks/teaching.py`` and
``benchmarks/families.py``: deterministic replays, so any change is real. A figure that got worse
(or failed) exits 1. Times and memory vary by tens of percent on shared cores; they are printed
for information and never fail the gate. ``--quick`` runs the fast deterministic benchmarks once
each, in well under a minute; CI runs it (tests/nocover/test_bench_smoke.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from kvsched.commands import UsageError
from kvsched.commands.output import emit
from kvsched.reports.bench import asv, checkout, verdict
from kvsched.spec.vocabulary import ExitCode

QUICK_BENCHMARKS = (r"^teaching\.", r"^families\.Stepped\.")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="compare the asv benchmarks of two commits; exit 1 if a tracked figure got worse",
        description="Run the asv suite (benchmarks/) for BASE and CANDIDATE offline in this "
        "Python environment, print asv's comparison, and gate on the deterministic track_* "
        "figures of the teaching trace and the workload families.",
    )
    parser.add_argument("--base", default="HEAD", help="baseline commit (default: HEAD)")
    parser.add_argument(
        "--candidate", help="commit to judge (default: the working tree, uncommitted changes too)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only the fast deterministic benchmarks, one sample each (the CI smoke)",
    )
    parser.add_argument(
        "--bench", action="append", metavar="REGEX", help="asv --bench selection (repeatable)"
    )
    parser.add_argument(
        "--factor", type=float, default=1.1, help="ratio asv marks as a change of time (1.1)"
    )
    parser.add_argument("--repo", type=Path, help="repository (default: the one around here)")
    parser.add_argument("--results", type=Path, help="keep asv's results in this folder")
    parser.add_argument("--all", action="store_true", help="print asv compare's whole table")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    try:
        return _bench(args)
    except checkout.CheckoutError as error:
        raise UsageError(str(error)) from None


def _bench(args: argparse.Namespace) -> int:
    repo = checkout.toplevel(args.repo or Path.cwd())
    with tempfile.TemporaryDirectory(prefix="kvsched-bench-") as scratch:
        work = Path(scratch)
        clone = work / "repo"
        base = checkout.commit_of(repo, args.base)
        named = checkout.commit_of(repo, args.candidate) if args.candidate else ""
        checkout.shared_clone(repo, clone)
        candidate = named or checkout.snapshot(repo, clone)
        label = args.candidate or "the working tree"
        emit(f"kvsched bench: base {args.base} ({base[:8]}) against {label} ({candidate[:8]})")
        exports = {c: checkout.export(clone, c, work / c) for c in {base, candidate}}
        results = args.results.resolve() if args.results else work / "results"
        config = asv.asv_config(work, clone, exports[candidate], results)
        selection = args.bench or (list(QUICK_BENCHMARKS) if args.quick else [])
        try:
            asv.register_machine(config)
            for name, commit in (("base", base), ("candidate", candidate)):
                emit(f"kvsched bench: asv run for the {name} ({commit[:8]}) ...")
                asv.run_suite(config, commit, exports[commit].site, selection, args.quick)
            shown = asv.compare(config, base, candidate, args.factor)
            strict = asv.compare(config, base, candidate, 1.0)  # any change of an exact figure
        except asv.AsvError as error:
            print(f"kvsched bench: {error}", file=sys.stderr)
            return ExitCode.INTERNAL
    rows = verdict.parse_compare(shown)
    result = verdict.gate(verdict.parse_compare(strict))
    table = shown if args.all else verdict.information(rows, args.factor)
    emit(f"{table}\n\n{result.describe()}")
    if not result.gated:
        print("kvsched bench: asv compared no gated figure; is benchmarks/ there?", file=sys.stderr)
        return ExitCode.INTERNAL
    return ExitCode.FINDING if result.worse else ExitCode.OK
