"""``kvsched prove``: run the Z3 proof set and say what was proved, for which sizes, how, how fast.

Exit codes: 0 every claim got its expected answer (proved; refuted for ``--broken`` schedulers),
1 a claim got the wrong definite answer (a counterexample to a claimed invariant, or a broken
scheduler the checks failed to refute), 4 nothing wrong but something *not proved* (an exhausted
Z3 resource budget or "unknown"), which is never reported as success. spec/proofs.md explains
every line. Z3's budgets are resource units (``rlimit``, checks/proofs/budgets.py), not seconds,
so the verdicts are the same on a busy machine as at rest; the seconds are reported beside them.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any

from kvsched.checks.proofs.budgets import DEFAULT, Budgets
from kvsched.commands import UsageError
from kvsched.commands.output import emit, printing
from kvsched.spec.vocabulary import ExitCode
from kvsched.spec.workload import workload_to_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prove",
        help="prove the invariants of the reference schedulers with Z3 (lemma, induction, BMC)",
        description="Prove the page-accounting lemma for all integers, the catalogue's safety "
        "invariants of the reference static and continuous schedulers by induction (any number of "
        "iterations) for N symbolic requests, and LIVE-1 by bounded model checking. Exit 0 if all "
        "proved, 1 on a counterexample, 4 if something was not proved (an exhausted Z3 "
        "resource budget, or unknown).",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=12,
        metavar="N",
        help="requests in the induction proofs (default 12)",
    )
    add_budget_options(parser)
    parser.add_argument(
        "--policy",
        choices=("static", "continuous", "both"),
        default="both",
        help="which transition system to prove (default both)",
    )
    parser.add_argument(
        "--bmc-requests",
        type=int,
        default=3,
        metavar="N",
        help="requests in bounded model checking (default 3; arrivals and outputs <= 3)",
    )
    parser.add_argument(
        "--broken",
        action="store_true",
        help="also show that bounded model checking refutes deliberately broken schedulers",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="prove the bounded model of the engine scheduler with preemption instead "
        "(spec/proofs.md, section 8)",
    )
    parser.add_argument(
        "--engine-requests",
        type=int,
        default=2,
        metavar="N",
        help="with --engine: requests in the safety induction (default 2)",
    )
    parser.add_argument(
        "--engine-horizon",
        type=int,
        default=4,
        metavar="K",
        help="with --engine: iterations unrolled in the LIVE-3 searches (default 4)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.requests < 1:
        raise UsageError(f"--requests must be >= 1, got {args.requests}")
    if args.bmc_requests < 1:
        raise UsageError(f"--bmc-requests must be >= 1, got {args.bmc_requests}")
    budgets = budgets_from(args)
    if args.engine_requests < 1 or args.engine_horizon < 1:
        raise UsageError("--engine-requests and --engine-horizon must be >= 1")
    from kvsched.checks.proofs import catalogue as proofs  # imports z3
    from kvsched.checks.proofs.bmc import Bounds
    from kvsched.checks.proofs.query import NOT_PROVED, PROVED

    plan = proofs.ProofPlan(
        requests=args.requests,
        budgets=budgets,
        policies=("static", "continuous") if args.policy == "both" else (args.policy,),
        bounds=Bounds(requests=args.bmc_requests),
        broken=args.broken,
    )
    from kvsched.commands.terminal import showing_progress

    started = time.perf_counter()
    with showing_progress(plain=args.json):  # on a terminal: which proof is under way
        if args.engine:
            results, (methods, not_covered) = _engine(args, budgets), _engine_notes()
        else:
            results = proofs.run_proofs(plan)
            methods, not_covered = proofs.METHODS, proofs.NOT_COVERED
    wall = time.perf_counter() - started
    outcome = proofs.outcome(results)
    if args.json:
        emit(json.dumps(_as_json(results, outcome, wall, not_covered, budgets), indent=2))
    else:
        with printing():
            _print_table(results, outcome, wall, methods, not_covered)
    if outcome == PROVED:
        return ExitCode.OK
    return ExitCode.NOT_PROVED if outcome == NOT_PROVED else ExitCode.FINDING


def add_budget_options(parser: Any) -> None:
    """``--rlimit-scale``, and the retired ``--timeout`` kept only to say what replaced it."""
    parser.add_argument(
        "--rlimit-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply every Z3 budget by F (default 1). Budgets are Z3 resource units "
        "(rlimit), not seconds, so a verdict is the same on a busy machine as at rest; an "
        "exhausted budget is reported as 'not proved'",
    )
    parser.add_argument("--timeout", type=float, default=None, help=argparse.SUPPRESS)


def budgets_from(args: argparse.Namespace) -> Budgets:
    if args.timeout is not None:
        raise UsageError(
            "--timeout is gone: Z3's budgets are resource units (rlimit) now, not seconds, so a "
            "verdict no longer depends on how busy the machine is. For bigger budgets pass "
            "--rlimit-scale F (for example --rlimit-scale 10); the seconds are still reported."
        )
    if not args.rlimit_scale > 0:
        raise UsageError(f"--rlimit-scale must be > 0, got {args.rlimit_scale}")
    return DEFAULT.scaled(args.rlimit_scale)


def _engine(args: argparse.Namespace, budgets: Budgets) -> Any:
    from kvsched.checks.proofs.engine.results import EnginePlan, run_engine_proofs
    from kvsched.checks.proofs.engine.unroll import EngineBounds

    plan = EnginePlan(
        requests=args.engine_requests,
        bounds=EngineBounds(horizon=args.engine_horizon),
        budgets=budgets,
    )
    return run_engine_proofs(plan)


def _engine_notes() -> tuple[dict[str, str], dict[str, str]]:
    from kvsched.checks.proofs.engine.results import ENGINE_METHODS, ENGINE_NOT_COVERED

    return ENGINE_METHODS, ENGINE_NOT_COVERED


def _print_table(
    results: Any, outcome: str, wall: float, methods: dict[str, str], not_covered: dict[str, str]
) -> None:
    from tabulate import tabulate

    rows = []
    for r in results:
        verdict = r.verdict.upper() if r.verdict == "not proved" else r.verdict
        if r.expected != "proved":
            verdict += " as expected" if r.as_expected else f" (expected {r.expected})"
        invariants = ", ".join(r.invariants) or "-"
        seconds = f"{r.seconds:.2f}"
        rows.append(
            (invariants, r.policy, r.claim, r.method, r.scope, verdict, seconds, _millions(r.units))
        )
    headers = ("invariant", "policy", "claim", "method", "for", "verdict", "seconds", "units (M)")
    widths = [None, None, 44, None, None, None, None, None]
    print(tabulate(rows, headers=headers, maxcolwidths=widths, disable_numparse=True))
    print()
    for method in dict.fromkeys(r.method for r in results):
        print(f"{method}: {methods[method]}")
    for invariant, why in not_covered.items():
        print(f"{invariant}: not covered: {why}")
    for r in results:
        if r.detail:
            print(f"{r.claim} ({r.policy}): {r.detail}")
        if r.counterexample is not None:
            _print_workload(r.counterexample)
    counts = {
        "proved": sum(r.verdict == "proved" and r.as_expected for r in results),
        "refuted as expected": sum(r.verdict == "refuted" and r.as_expected for r in results),
        "with an unexpected answer": sum(
            r.verdict != "not proved" and not r.as_expected for r in results
        ),
        "NOT PROVED": sum(r.verdict == "not proved" for r in results),
    }
    summary = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
    units = sum(r.units for r in results)
    print(
        "units: the Z3 resource units (rlimit count, millions) a line spent; budgets are in "
        "these units, so the seconds, which vary with the load, decide nothing"
    )
    print(f"\n{summary}; {wall:.1f} s wall time, {_millions(units)} million units. ", end="")
    print(f"Overall: {outcome.upper()}")
    if outcome == "not proved":
        print(
            "NOT PROVED is not a pass: raise --rlimit-scale (Z3's resource budgets) or lower "
            "--requests and run again."
        )


def _millions(units: int) -> str:
    return f"{units / 1e6:.2f}"


def _print_workload(w: Any) -> None:
    limits = w.limits
    print(
        f"  workload: batch limit {limits.batch_limit}, page size {limits.page_size}, "
        f"pool {limits.pool_pages} pages"
    )
    for q in w.requests:
        print(
            f"    {q.id}: arrival {q.arrival}, prompt {q.prompt_tokens}, output {q.output_tokens}"
        )


def _as_json(
    results: Any, outcome: str, wall: float, not_covered: dict[str, str], budgets: Budgets
) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "wall_seconds": wall,
        "rlimit_budgets": asdict(budgets),
        "not_covered": not_covered,
        "results": [
            {
                "claim": r.claim,
                "invariants": list(r.invariants),
                "policy": r.policy,
                "method": r.method,
                "scope": r.scope,
                "statement": r.statement,
                "verdict": r.verdict,
                "expected": r.expected,
                "seconds": r.seconds,
                "units": r.units,
                "detail": r.detail,
                "counterexample": workload_to_json(r.counterexample) if r.counterexample else None,
            }
            for r in results
        ],
    }
