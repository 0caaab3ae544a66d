"""``kvsched init learner|scheduler|log DIR``: a starter to edit, and the command to type next.

Each kind of user starts from one file (:mod:`.starters`): a learner from the exercise with its
TODOs, an engineer from a scheduler class behind the protocol, or from a script writing an event
log. The file runs as written; the command that checks it is printed, with what it will answer.
An existing file is never overwritten.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from kvsched.commands import UsageError, starters
from kvsched.commands.output import emit, writing

KINDS = {
    "learner": (
        "solution.py",
        starters.LEARNER,
        "a start on the lesson's exercise, with three TODOs",
        "kvsched check {file}",
        "It fails until the TODOs are done: PAGE-1 (TODO 1), and LIVE-2 under static batching "
        "and BATCH-3 under continuous (TODO 2); spec/learner.md says what each function must do.",
    ),
    "scheduler": (
        "scheduler.py",
        starters.SCHEDULER,
        "a continuous-batching scheduler class behind kvsched's protocol",
        "kvsched check {file}:MyScheduler",
        "It passes as written; make it your design and check again.",
    ),
    "log": (
        "record.py",
        starters.LOG,
        "a toy engine that writes an event log, one JSON line per iteration",
        "python {file} && kvsched check {log}",
        "The log passes as written; have your engine write the same lines.",
    ),
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "init",
        help="write a starter (a learner's solution, a scheduler class or an event-log writer)",
        description="Write a starter file into DIR and print the command that checks it: "
        "learner (the lesson's exercise, to complete), scheduler (a scheduler class), log (a "
        "script writing an event log). An existing file is left alone (exit 2).",
    )
    parser.add_argument("kind", choices=tuple(KINDS), help="who the starter is for")
    parser.add_argument("dir", type=Path, help="the folder to write it into (made if missing)")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kvsched.checks.verdict.files import make_folder, write_file

    name, text, what, command, outcome = KINDS[args.kind]
    path = args.dir / name
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path} exists already; name another folder, or move it away first")
    with writing(str(path)):
        make_folder(args.dir)
        write_file(path, text)
    quoted = shlex.quote(str(path))
    log = shlex.quote(str(args.dir / "run.jsonl"))
    emit(f"Wrote {path}: {what}.\nNext, type:\n  {command.format(file=quoted, log=log)}\n{outcome}")
    return 0
