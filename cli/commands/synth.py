"""``kvsched synth``: answer a question about static vs continuous batching with a workload.

Questions (checks/proofs/synthesis.py says how each is searched, spec/proofs.md what was measured):

- ``p95-inversion``: a workload where continuous batching has a higher P95 wait than static;
- ``iteration-gap``: the N-request workload maximizing static minus continuous iterations;
- ``continuous-loses``: where continuous batching loses (more KV pages at its peak);
- ``reuse``: a workload whose pages fit only if freed pages are reused the next iteration.

Every workload is verified with the reference before it is printed or written. Exit 0 when the
question is answered (a verified workload, or a proof that none exists), 1 when it is not (the
search found nothing, or Z3 did not decide within its resource budget, which is in Z3's units,
not seconds: ``--rlimit-scale`` as for ``kvsched prove``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvsched.commands import UsageError
from kvsched.commands.output import emit, printing, writing
from kvsched.commands.prove import add_budget_options, budgets_from
from kvsched.spec.vocabulary import ExitCode
from kvsched.spec.workload import workload_to_json

QUESTIONS = ("p95-inversion", "iteration-gap", "continuous-loses", "reuse")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "synth",
        help="synthesize a workload that answers a question about the two policies",
        description="Find a workload with a property (or prove none exists), verify it with the "
        "reference engine and print both policies' figures; with --out, write the workload file.",
    )
    parser.add_argument("question", choices=QUESTIONS)
    parser.add_argument("--requests", type=int, default=9, metavar="N", help="default 9")
    parser.add_argument("--batch-limit", type=int, default=3, metavar="B", help="default 3")
    parser.add_argument("--page-size", type=int, default=16, metavar="S", help="default 16")
    parser.add_argument(
        "--pool-pages", type=int, default=None, metavar="P", help="default: part of the search"
    )
    parser.add_argument("--max-prompt", type=int, default=64, metavar="T", help="default 64")
    parser.add_argument("--max-output", type=int, default=40, metavar="T", help="default 40")
    parser.add_argument("--max-arrival", type=int, default=40, metavar="T", help="default 40")
    parser.add_argument(
        "--examples",
        type=int,
        default=1000,
        metavar="K",
        help="workloads Hypothesis tries (default 1000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    parser.add_argument(
        "--method",
        choices=("z3", "hypothesis"),
        default=None,
        help="for 'reuse': z3 (default, fastest) or hypothesis",
    )
    add_budget_options(parser)
    parser.add_argument("--out", type=Path, help="write the workload file here")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    _validate(args)
    budgets = budgets_from(args)
    from kvsched.checks.proofs import synthesis as synth  # imports hypothesis and z3
    from kvsched.checks.verdict.files import write_file

    space = synth.SearchSpace(
        requests=args.requests,
        batch_limit=args.batch_limit,
        page_size=args.page_size,
        pool_pages=args.pool_pages,
        max_prompt=args.max_prompt,
        max_output=args.max_output,
        max_arrival=args.max_arrival,
    )
    if args.question == "p95-inversion":
        answer = synth.answer_p95_inversion(args.requests, budgets.induction)
    elif args.question == "iteration-gap":
        answer = synth.answer_iteration_gap(space, args.examples, args.seed)
    elif args.question == "continuous-loses":
        answer = synth.answer_continuous_loses(space, args.examples, args.seed)
    elif args.method == "hypothesis":
        answer = synth.answer_reuse_by_hypothesis(space, args.examples, args.seed)
    else:
        answer = synth.answer_reuse_by_z3(space, budgets.bmc)
    if args.json:
        emit(json.dumps(_as_json(answer), indent=2))
    else:
        with printing():
            _print(answer)
    if answer.workload is not None and args.out:
        with writing(f"--out {args.out}"):
            write_file(args.out, json.dumps(workload_to_json(answer.workload), indent=2) + "\n")
        if not args.json:
            emit(f"wrote {args.out}")
    elif answer.workload is not None and not args.json:
        emit("(not saved: add --out FILE to write the workload file)")
    answered = answer.workload is not None or answer.verdict.startswith("none exists")
    return ExitCode.OK if answered else ExitCode.FINDING


def _validate(args: argparse.Namespace) -> None:
    for name in ("requests", "batch_limit", "page_size", "max_output", "examples"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("max_prompt", "max_arrival"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.pool_pages is not None and args.pool_pages < 1:
        raise UsageError(f"--pool-pages must be >= 1, got {args.pool_pages}")
    if args.question in ("reuse", "iteration-gap", "p95-inversion") and args.requests < 2:
        # reuse needs a page freed by one request and taken by another; a gap or an inversion
        # between the policies needs someone to wait
        raise UsageError(f"'{args.question}' needs --requests >= 2, got {args.requests}")
    if args.method is not None and args.question != "reuse":
        raise UsageError("--method applies to the 'reuse' question only")


def _print(answer: Any) -> None:
    from tabulate import tabulate

    print(f"question: {answer.claim}")
    print(f"method:   {answer.method} ({answer.seconds:.2f} s)")
    if answer.workload is None:
        print(f"answer:   {answer.verdict}")
        return
    print(f"answer:   {answer.verdict} (verified with the reference engine)")
    metrics = dict(answer.metrics)
    rows = [
        (name, *(getattr(metrics[p], field) for p in ("static", "continuous")))
        for name, field in (
            ("iterations", "iterations"),
            ("utilization", "utilization"),
            ("P50 wait", "p50_wait"),
            ("P95 wait", "p95_wait"),
            ("max wait", "max_wait"),
            ("peak KV pages", "peak_pages"),
            ("mean wasted slots", "mean_wasted_slots"),
        )
    ]
    print()
    print(tabulate(rows, headers=("", "static", "continuous"), floatfmt=".2f"))
    w = answer.workload
    limits = w.limits
    print(
        f"\nworkload: batch limit {limits.batch_limit}, page size {limits.page_size}, "
        f"pool {limits.pool_pages} pages"
    )
    for r in w.requests:
        print(f"  {r.id}: arrival {r.arrival}, prompt {r.prompt_tokens}, output {r.output_tokens}")


def _as_json(answer: Any) -> dict[str, Any]:
    return {
        "question": answer.question,
        "claim": answer.claim,
        "method": answer.method,
        "seconds": answer.seconds,
        "answer": answer.verdict,
        "workload": workload_to_json(answer.workload) if answer.workload else None,
        "metrics": {policy: m.as_dict() for policy, m in answer.metrics},
    }
