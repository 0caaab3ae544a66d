"""``kvsched reconstruct``: find the lesson's teaching trace again with Z3 (spec/traces/)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvsched.commands.output import emit, printing, writing
from kvsched.commands.prove import add_budget_options, budgets_from
from kvsched.spec.teaching import LESSON_PERCENTILE_METHOD
from kvsched.spec.workload import workload_to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "reconstruct",
        help="re-run the Z3 search that reconstructs the lesson's teaching trace",
        description="Ask Z3 whether the lesson's six figures and storyboard can all hold under "
        "linear percentiles (they cannot) and under each of numpy's percentile conventions, then "
        "find the workload under the lesson's (lower) and write it. The workload is replayed with "
        "the reference.",
    )
    parser.add_argument("--out", type=Path, help="write the workload file here")
    add_budget_options(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    budget = budgets_from(args).teaching
    from kvsched.checks.proofs.teaching import reconstruct as teaching_trace

    # The answers are printed as they come (each may take minutes), so all of it is the output.
    with printing():
        return _reconstruct(args, teaching_trace, budget)


def _reconstruct(args: argparse.Namespace, teaching_trace: Any, budget: int) -> int:
    from kvsched.checks.verdict.files import write_file

    meaning = {"unsat": "impossible (proved)", "sat": "possible", "unknown": "not decided"}
    print("under linear percentiles (the default, spec/semantics.md 7.4):")
    for question in teaching_trace.QUESTIONS:
        answer = teaching_trace.ask(question, budget)
        print(f"  {answer.question}: {meaning[answer.verdict]} ({_cost(answer)})")
    print("under each of numpy's other percentile methods:")
    for _, answer in teaching_trace.conventions(budget, skip=("linear",)):
        print(f"  {answer.question}: {meaning[answer.verdict]} ({_cost(answer)})")

    workload = teaching_trace.closest(budget)
    if workload is None:
        print(
            f"the workload under {LESSON_PERCENTILE_METHOD}: none found within Z3's resource "
            "budget (raise --rlimit-scale)"
        )
        return 1
    print(f"the workload: storyboard and all six figures, P95 by {workload.percentile_method}")
    for request in workload.requests:
        print(
            f"  {request.id}: arrival {request.arrival:3d}, prompt {request.prompt_tokens:3d}, "
            f"output {request.output_tokens:3d}"
        )
    for policy, figures in teaching_trace.verify(workload).items():
        print(
            f"  {policy:10s} iterations {figures['iterations']}, utilization "
            f"{figures['utilization']:.1%}, P95 wait {figures['p95_wait']:.1f} (reference replay)"
        )
    if args.out:
        with writing(f"--out {args.out}"):
            write_file(args.out, json.dumps(workload_to_json(workload), indent=2) + "\n")
        emit(f"wrote {args.out}")
    return 0


def _cost(answer: Any) -> str:
    return f"{answer.seconds:.1f} s, {answer.units / 1e6:.0f} million Z3 resource units"
