"""``kvsched mutants``: run the mutant zoo and print the mutation score.

The zoo (kvsched.checks.mutants.zoo, shipped with the package) lists deliberately broken
schedulers, learner solutions and an event log, each with the invariant ``kvsched check`` must
report. The score is the number caught with exactly that id over the number of mutants. Exit 0
when every mutant is caught, 1 otherwise, 2 when a zoo given with --zoo cannot be loaded.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsched.commands import UsageError
from kvsched.commands.output import emit

if TYPE_CHECKING:  # the checks are imported when the command runs, not when it is registered
    from collections.abc import Sequence

    from kvsched.checks.mutants.run import MutantOutcome


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "mutants",
        help="run the mutant zoo through kvsched check and print the mutation score",
        description="Check every mutant of the zoo and print which invariant caught it. A mutant "
        "is caught only if every violation reported carries its expected id.",
    )
    parser.add_argument(
        "--zoo",
        type=Path,
        default=None,
        help="a Python module defining its own ZOO (default: the zoo shipped with kvsched)",
    )
    parser.add_argument("--profile", choices=("ci", "dev", "thorough"), default="ci")
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import json

    from kvsched.checks.mutants.run import (
        MutantSpec,
        ZooError,
        check_mutant,
        load_zoo,
        mutation_score,
    )
    from kvsched.checks.mutants.zoo import ZOO

    zoo: tuple[MutantSpec, ...] = ZOO
    if args.zoo is not None:
        try:
            zoo = load_zoo(args.zoo)
        except ZooError as error:
            raise UsageError(str(error)) from None
    from kvsched.checks import progress
    from kvsched.commands.terminal import showing_progress

    outcomes = []
    with (
        tempfile.TemporaryDirectory(prefix="kvsched-mutants-") as workdir,
        showing_progress(plain=args.json),  # on a terminal: which mutant, and its check's phase
    ):
        for number, mutant in enumerate(zoo, 1):
            with progress.within(f"mutant {number}/{len(zoo)}, {mutant.name}"):
                outcomes.append(check_mutant(mutant, Path(workdir), profile=args.profile))
    caught, total = mutation_score(outcomes)
    if args.json:
        rows = [
            {
                "mutant": o.name,
                "bug": o.bug,
                "expected": o.expected,
                "reported": list(o.reported),
                "caught": o.caught,
                "seconds": round(o.seconds, 3),
            }
            for o in outcomes
        ]
        emit(json.dumps({"caught": caught, "total": total, "mutants": rows}, indent=2))
    else:
        emit(
            outcome_table(outcomes)
            + f"\n\nmutation score: {caught}/{total} mutants caught with the right invariant id "
            f"({args.profile} profile)"
        )
    return 0 if caught == total else 1


def outcome_table(outcomes: Sequence[MutantOutcome]) -> str:
    """One row per mutant, folded to fit a terminal (the planted bug is a sentence)."""
    from kvsched.reports.text_table import text_table

    rows = [
        (o.name, o.bug, o.expected, ", ".join(o.reported) or "nothing",
         "yes" if o.caught else "NO", f"{o.seconds:.2f}")
        for o in outcomes
    ]  # fmt: skip
    headers = ["mutant", "planted bug", "expected", "reported", "caught", "seconds"]
    return text_table(rows, headers)
