"""``kvsched report``: run workloads under policies (or read asv results), write a report, gate.

Writes ``OUT/NAME/report.md``, ``report.html`` (self-contained), ``results.json`` (the figures,
readable back as a later report's ``--baseline``) and the PNG plots. With ``--baseline`` the
report compares every metric; each ``--fail-on`` threshold then makes the command exit 1 when a
case regresses beyond it, which is the CI gate. Bad arguments exit 2 before anything runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsched.commands import UsageError
from kvsched.commands.limits import add_limit_options
from kvsched.commands.output import emit, writing
from kvsched.commands.policies import hosted_policies
from kvsched.reference import POLICIES
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import Workload, WorkloadError

if TYPE_CHECKING:
    from kvsched.reports.crowd import Zoom
    from kvsched.reports.gate import Threshold
    from kvsched.reports.results import ResultSet

DEFAULT_POLICIES = "static,continuous"
DEFAULT_OUT = "reports"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a Markdown and HTML report with metric tables and plots; gate regressions",
        description="Run WORKLOADs under the policies with the reference engine (or read asv "
        "results) and write OUT/NAME/report.md, report.html, results.json and PNG plots. With "
        "--baseline, compare; with --fail-on, exit 1 on a regression beyond a threshold.",
    )
    parser.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help="a workload file, or family:NAME:SIZE[:SEED] for a seeded randomized workload "
        "(kvsched.reference.families); default: the teaching trace",
    )
    parser.add_argument(
        "--policies",
        default=DEFAULT_POLICIES,
        help="comma-separated: a reference policy (static, continuous) or NAME=TARGET for a "
        f"scheduler as `kvsched check` loads it (pkg.mod:Class, file.py:Class); default "
        f"{DEFAULT_POLICIES}",
    )
    add_limit_options(parser, "report")
    parser.add_argument("--name", help="report folder name (default: the workload's name)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"parent folder (default {DEFAULT_OUT})")
    parser.add_argument(
        "--baseline",
        metavar="SOURCE",
        help="compare against a previous report (its folder or results.json) or asv results "
        "(a results folder or run file, optionally @COMMIT)",
    )
    parser.add_argument(
        "--asv-results",
        metavar="SOURCE",
        help="report these asv results (a results folder or run file, optionally @COMMIT) "
        "instead of running workloads",
    )
    parser.add_argument(
        "--history",
        metavar="FOLDER",
        help="draw --metric figures over commits, oldest first, from an asv results folder or "
        "a folder of earlier reports (every results.json under it), into OUT/history/ "
        "(history.html, history.md and one plot per metric); with --fail-on, mark the commits "
        "where a figure moved beyond a threshold (otherwise where it moved at all)",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="a figure for --history, e.g. p95_wait (a track_* benchmark less its prefix); "
        "repeatable; default the --fail-on metrics, else p95_wait and iterations",
    )
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="THRESHOLD",
        help="exit 1 if a metric regresses beyond THRESHOLD against --baseline: 'p95_wait>+5%%' "
        "(rise over 5%%), 'utilization<-5%%' (fall over 5%%), 'iterations>+3' (absolute); "
        "repeatable",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "stepped", "fast"),
        default="auto",
        help="stepped: the iteration loop (all plots); fast: the event-jumping replay of the "
        "reference policies (no per-iteration plots); auto: fast from 5000 requests",
    )
    parser.add_argument(
        "--zoom",
        default="",
        metavar="FIRST:COUNT",
        help="above 300 requests the timeline shows counts over time and a zoom on COUNT "
        "requests from the FIRST-th (1-based, declared order), one row each; default: 40 from "
        "the middle of the workload; 'none' leaves the zoom out",
    )
    parser.add_argument(
        "--no-plots",
        action="store_true",
        help="tables only: skip the PNG plots (a quick CI gate on large workloads)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kvsched.reports.gate import (
        ThresholdError,
        parse_threshold,
    )
    from kvsched.reports.results import ResultsError
    from kvsched.reports.sources import read_source

    if args.history:
        from kvsched.commands.report_history import draw_history

        return draw_history(args)
    try:
        thresholds = [parse_threshold(text) for text in args.fail_on]
    except ThresholdError as error:
        raise UsageError(f"--fail-on {error}") from None
    if thresholds and not args.baseline:
        raise UsageError("--fail-on needs --baseline: a threshold limits the change from it")
    if args.asv_results and args.workloads:
        raise UsageError("give WORKLOADs to run or --asv-results to read, not both")
    try:
        baseline = read_source(args.baseline) if args.baseline else None
        candidate = read_source(args.asv_results) if args.asv_results else None
    except ResultsError as error:
        raise UsageError(str(error)) from None
    workloads = [] if candidate else _workloads(args.workloads)
    with hosted_policies("" if candidate else args.policies, args) as policies:
        if policies is None:  # a scheduler under test broke its host while being imported
            return 1
        return _report(args, workloads, policies, candidate, baseline, thresholds)


def _report(
    args: argparse.Namespace,
    workloads: list[Workload],
    policies: dict[str, SchedulerFactory],
    candidate: ResultSet | None,
    baseline: ResultSet | None,
    thresholds: list[Threshold],
) -> int:
    from kvsched.reports.gate import ThresholdError

    under_test = [name for name, factory in policies.items() if factory is not POLICIES.get(name)]
    if args.engine == "fast" and under_test:
        raise UsageError(
            f"--engine fast replays the reference policies only; {', '.join(under_test)} "
            "must run stepped (use --engine auto or stepped)"
        )
    name = args.name or ("asv-report" if candidate else "")
    if not name:
        if len(workloads) > 1:
            raise UsageError("several workloads have no single name: give the report --name")
        name = workloads[0].name
    if "/" in name or name in (".", ".."):
        raise UsageError(f"--name '{name}' must be a plain folder name, without '/'")
    folder = Path(args.out) / name
    # Checked before the runs, so an unwritable --out costs nothing and creates nothing.
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise UsageError(f"--out: cannot create {folder}: {existing} is not a writable folder")

    from kvsched.reports.build import build_report

    try:
        # Every input was read before: an OSError here is writing the report.
        with writing(f"--out {folder}"):
            report = build_report(
                folder,
                _command(args, name),
                workloads,
                policies,
                args.engine,
                candidate,
                baseline,
                thresholds,
                teaching=_teaching(),
                plots=not args.no_plots,
                baseline_name=args.baseline or "",
                zoom=_zoom(args.zoom),
            )
    except ThresholdError as error:
        raise UsageError(f"--fail-on {error}") from None
    emit(f"wrote {folder / 'report.md'} and {folder / 'report.html'}")
    if report.comparison is not None:
        for warning in report.comparison.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    # A scheduler under test that failed or starved is a finding on it, gate or no gate.
    broken = [case for case in report.cases if case.under_test and case.problem]
    for case in broken:
        print(f"{case.policy} on {case.workload.name}: {case.problem}", file=sys.stderr)
    if report.verdict is None:
        return 1 if broken else 0
    for problem in report.verdict.problems:
        print(f"regression: {problem}", file=sys.stderr)
    verdict = (
        "passed"
        if report.verdict.passed
        else ("FAILED" if report.verdict.breaches else "FAILED (incomplete)")
    )
    count = len(report.verdict.problems)
    emit(f"gate {verdict}: {count} regression(s), {len(thresholds)} threshold(s)")
    return 0 if report.verdict.passed else 1


def _zoom(text: str) -> Zoom | None:
    from kvsched.reports.crowd import DEFAULT_ZOOM, Zoom

    if not text:
        return DEFAULT_ZOOM
    if text == "none":
        return None
    first, _, count = text.partition(":")
    if not first.isdigit() or int(first) < 1 or (count and not count.isdigit()):
        raise UsageError(
            f"--zoom '{text}': expected FIRST:COUNT (whole numbers, FIRST from 1), FIRST, or none"
        )
    return Zoom(int(first) - 1, int(count) if count else DEFAULT_ZOOM.size)


def _workloads(specs: list[str]) -> list[Workload]:
    if not specs:
        return [load_teaching_trace()]
    workloads = [_workload(spec) for spec in specs]
    seen: dict[str, str] = {}
    for spec, workload in zip(specs, workloads, strict=True):
        if workload.name in seen:
            raise UsageError(
                f"{spec} and {seen[workload.name]} are both named '{workload.name}'; a report "
                "keys its figures by workload name, so give them different names"
            )
        seen[workload.name] = spec
    return workloads


def _workload(spec: str) -> Workload:
    from kvsched.reference.families import workload_from_spec

    return workload_from_spec(spec)


def _teaching() -> Workload | None:
    try:
        return load_teaching_trace()
    except (WorkloadError, OSError):
        return None


def _command(args: argparse.Namespace, name: str) -> str:
    """The command line that regenerates this report, with defaults left out."""
    words = ["kvsched", "report", *args.workloads]
    if args.policies != DEFAULT_POLICIES:
        words += ["--policies", args.policies]
    if args.asv_results:
        words += ["--asv-results", args.asv_results]
    words += ["--name", name, "--out", args.out]
    if args.engine != "auto":
        words += ["--engine", args.engine]
    if args.zoom:
        words += ["--zoom", args.zoom]
    if args.no_plots:
        words.append("--no-plots")
    if args.baseline:
        words += ["--baseline", args.baseline]
    for threshold in args.fail_on:
        words += ["--fail-on", threshold]
    return shlex.join(words)
