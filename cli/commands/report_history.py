"""``kvsched report --history FOLDER``: figures over commits, from asv results or earlier reports.

Kept apart from the report run (:mod:`kvsched.commands.report`), which shares only its options:
a history reads results and draws them, it runs nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvsched.commands import UsageError
from kvsched.commands.output import fresh_folder, printing, writing

MAKING_A_HISTORY = """\
A history is asv's runs, one per commit, or earlier reports' results.json files. To make one
with asv, in a checkout of kvsched installed as the README says:
  asv machine --yes                                               # once
  asv run --python=same --set-commit-hash=HEAD --bench teaching   # at each commit, a few seconds
which writes .asv/results (without --bench: the whole suite). To keep two commits' runs:
  kvsched bench --base A --candidate B --results DIR
docs/reports.md says more."""
"""What ``--history`` says when it finds no run: a fresh clone has no .asv/results."""


def draw_history(args: argparse.Namespace) -> int:
    """``kvsched report --history``: read, mark, draw; bad input exits 2 naming it."""
    from kvsched.reports.gate import ThresholdError, parse_threshold
    from kvsched.reports.history import NoHistory, read_history
    from kvsched.reports.history_view import write_history
    from kvsched.reports.results import ResultsError

    if args.workloads or args.baseline or args.asv_results:
        raise UsageError("--history draws figures over commits; it takes no other input")
    try:
        thresholds = [parse_threshold(text) for text in args.fail_on]
    except ThresholdError as error:
        raise UsageError(f"--fail-on {error}") from None
    metrics = args.metric or sorted({t.metric for t in thresholds}) or ["p95_wait", "iterations"]
    try:
        histories = read_history(Path(args.history), metrics, thresholds)
    except NoHistory as error:
        raise UsageError(f"--history {error}\n{MAKING_A_HISTORY}") from None
    except ResultsError as error:
        raise UsageError(f"--history {error}") from None
    name = args.name or "history"
    folder = Path(args.out) / name if args.out else fresh_folder(f"kvsched-{name}")
    with writing(f"--out {folder}"):
        written = write_history(histories, folder, args.history, thresholds)
    with printing():
        print(f"wrote {written} and history.md: {len(histories[0].commits)} commits")
        for history in histories:
            for label, index in history.moved:
                print(f"moved: {history.metric} of {label} at {history.commits[index]}")
    return 0
