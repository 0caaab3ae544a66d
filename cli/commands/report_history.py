"""``kvsched report --history FOLDER``: figures over commits, from asv results or earlier reports.

Kept apart from the report run (:mod:`kvsched.commands.report`), which shares only its options:
a history reads results and draws them, it runs nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvsched.commands import UsageError
from kvsched.commands.output import fresh_folder, printing, writing


def draw_history(args: argparse.Namespace) -> int:
    """``kvsched report --history``: read, mark, draw; bad input exits 2 naming it."""
    from kvsched.reports.gate import ThresholdError, parse_threshold
    from kvsched.reports.history import read_history
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
