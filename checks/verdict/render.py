"""Rendering a check's :class:`~.report.Report`: a table, JSON and JUnit XML.

The table lists every invariant with its verdict and how it was checked; a violation follows it in
words a learner understands: what broke, the smallest workload that shows it (request by request),
the last iterations before it, and the command that replays it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from typing import Any

from tabulate import tabulate

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.verdict.report import NOT_APPLICABLE, NOT_CHECKED, VIOLATED, Report, Verdict
from kvsched.spec.invariants import BY_ID, EFFICIENCY, LAYERS, layer_of
from kvsched.spec.text import describe_event, describe_workload
from kvsched.spec.vocabulary import is_policy
from kvsched.spec.workload import workload_to_json

BY_FIGURE = {figure.id: figure for figure in EFFICIENCY}


def render_table(report: Report, reproduce: str = "") -> str:
    """The report for a terminal. ``reproduce`` is the command line to rerun, without --workload."""
    blocks: list[str] = [report.grade.describe()] if report.grade is not None else []
    if report.allocator is not None:
        allocator = report.allocator
        if allocator.finding is None:
            blocks.append(
                f"allocate_kv_pages: holds on {allocator.calls} cases "
                "(exact values from 0 tokens to 10**30, full and partial pages; section 2)"
            )
        else:
            blocks.append(
                f"allocate_kv_pages: VIOLATES {allocator.finding.invariant} "
                f"({BY_ID[allocator.finding.invariant].title})\n  {allocator.finding.message}"
            )
        if allocator.advice:
            blocks.append(
                "Advice, not graded (inputs outside the exercise's domain are the caller's "
                "responsibility; --strict-inputs grades them):\n"
                + "\n".join(f"  {line}" for line in allocator.advice)
            )
    for verdict in report.verdicts:
        blocks.append(_render_verdict(verdict, reproduce))
    limits = report.grade.limits if report.grade is not None else None
    blocks.extend(note for note in report.notes if note != limits)  # stated at the top
    undeclared = any(
        not is_policy(v.policy) and any(r.status == NOT_APPLICABLE for r in v.invariants)
        for v in report.verdicts
    )
    if not report.ok:
        outcome = "VIOLATION found"
    elif undeclared:
        outcome = "every invariant checked holds; some were not checked (no policy declared)"
    else:
        outcome = "every invariant holds"
    blocks.append(f"{report.target}: {outcome} ({report.seconds:.1f} s)")
    return "\n\n".join(blocks)


def _render_verdict(verdict: Verdict, reproduce: str) -> str:
    policy = f"{verdict.policy} batching" if verdict.policy else "no declared policy"
    title = f"{verdict.target} ({verdict.kind}, {policy})"
    # Rows by layer, in the catalogue's order of layers: safety, liveness, conformance.
    ordered = sorted(verdict.invariants, key=lambda row: LAYERS.index(layer_of(row.invariant)))
    rows = [(row.invariant, row.layer, row.status, row.how) for row in ordered]
    headers = ["invariant", "layer", "verdict", "how checked"]
    table = tabulate(rows, headers=headers, tablefmt="simple")
    parts = [title, table, *verdict.notes]
    if verdict.declarations:
        parts.append("Declarations that took out or relaxed a check, and what they excused:")
        parts.extend(f"  {excuse.describe()}" for excuse in verdict.declarations)
    if verdict.efficiency:
        parts.append(_efficiency_line(verdict))
    if verdict.finding is not None:
        parts.append(explain(verdict, reproduce))
    return "\n".join(parts)


def _efficiency_line(verdict: Verdict) -> str:
    figures = "; ".join(
        f"{BY_FIGURE[figure].title.lower()} {value}" for figure, value in verdict.efficiency
    )
    return f"Efficiency on {verdict.efficiency_on} (measured, never a violation): {figures}."


def explain(verdict: Verdict, reproduce: str = "") -> str:
    """A violation in words: what broke, on which smallest workload, and how to replay it."""
    finding = verdict.finding
    assert finding is not None
    if finding.iteration:
        when = f" in iteration {finding.iteration}"
    else:  # iteration 0: decided at the end of the run, or a call outside any iteration
        when = "" if finding.invariant == "PROTO-1" else " at the end of the run"
    lines = [
        "",
        f"{finding.invariant} violated{when}: {BY_ID[finding.invariant].title}.",
        *(f"  {line}" for line in finding.message.splitlines()),
    ]
    failing = verdict.counterexample
    if failing is not None:
        lines.append("")
        lines.append(f"Smallest failing workload ({failing.found_by}):")
        lines.extend(f"  {line}" for line in describe_workload(failing.workload))
    if finding.recent:
        lines.append("")
        lines.append("The last iterations up to the violation:")
        lines.extend(f"  {describe_event(event)}" for event in finding.recent)
    if failing is not None and failing.saved_to:
        lines.append("")
        lines.append(f"Workload file: {failing.saved_to}. Replay it with:")
        if reproduce and verdict.kind != "event log":  # a recording cannot be rerun
            policy = f" --policy {verdict.policy}" if verdict.policy else ""
            lines.append(f"  {reproduce} --workload {failing.saved_to}{policy}")
        lines.append(f"  kvsched replay {failing.saved_to}   (the reference schedulers on it)")
    if failing is not None and failing.reproduce_blob:
        lines.append(f"Hypothesis reproduce blob: {failing.reproduce_blob}")
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(report_to_json(report), indent=2)


def report_to_json(report: Report) -> dict[str, Any]:
    allocator = report.allocator
    return {
        "target": report.target,
        "ok": report.ok,
        "exit_code": report.exit_code,
        "seconds": round(report.seconds, 3),
        "allocator": None
        if allocator is None
        else {
            "ok": allocator.ok,
            "calls": allocator.calls,
            "finding": _finding_json(allocator.finding),
            "advice": list(allocator.advice),
        },
        "verdicts": [_verdict_json(v) for v in report.verdicts],
        "notes": list(report.notes),
        "sandbox": None
        if report.sandbox is None
        else {"kind": report.sandbox[0], "reason": report.sandbox[1]},
        "grade": None
        if report.grade is None
        else {"allowed": list(report.grade.allowed), "limits": report.grade.limits},
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    failing = verdict.counterexample
    evidence = verdict.evidence
    return {
        "target": verdict.target,
        "kind": verdict.kind,
        "policy": verdict.policy,
        "ok": verdict.ok,
        "invariants": [
            {
                "id": r.invariant,
                "title": r.title,
                "layer": r.layer,
                "verdict": r.status,
                "how": r.how,
            }
            for r in verdict.invariants
        ],
        "efficiency": {
            "measured_on": verdict.efficiency_on,
            "figures": {
                figure: {"title": BY_FIGURE[figure].title, "value": value}
                for figure, value in verdict.efficiency
            },
        },
        "evidence": {
            "monitor_runs": evidence.monitor_runs,
            "fixed_workloads": list(evidence.fixed_workloads),
            "hypothesis_examples": evidence.hypothesis_examples,
            "hypothesis_profile": evidence.hypothesis_profile,
            "log_iterations": evidence.log_iterations,
        },
        "finding": _finding_json(verdict.finding),
        "allocator_finding": _finding_json(verdict.allocator_finding),
        "counterexample": None
        if failing is None
        else {
            "workload": workload_to_json(failing.workload),
            "found_by": failing.found_by,
            "saved_to": failing.saved_to,
            "reproduce_blob": failing.reproduce_blob,
        },
        "notes": list(verdict.notes),
        "declarations": [
            {
                "declaration": e.declaration,
                "declared": e.value,
                "invariants": list(e.invariants),
                "excused": e.excused,
                "count": e.count,
            }
            for e in verdict.declarations
        ],
    }


def _finding_json(finding: Finding | None) -> dict[str, Any] | None:
    if finding is None:
        return None
    return {
        "invariant": finding.invariant,
        "iteration": finding.iteration,
        "message": finding.message,
        "requests": list(finding.requests),
        "pages": list(finding.pages),
        "recent": [describe_event(e) for e in finding.recent],
    }


def render_junit_xml(report: Report, reproduce: str = "") -> str:
    """JUnit XML: a testsuite per verdict, a testcase per invariant (skipped: n/a, not checked)."""
    root = ElementTree.Element("testsuites", name=f"kvsched check {report.target}")
    if report.allocator is not None:
        suite = _suite(root, f"{report.target} allocate_kv_pages", 1)
        case = ElementTree.SubElement(
            suite, "testcase", classname="kvsched.allocate_kv_pages", name="PAGE-1 section 2"
        )
        if report.allocator.finding is not None:
            _failure(
                suite, case, report.allocator.finding.message, report.allocator.finding.message
            )
    for verdict in report.verdicts:
        suite = _suite(
            root, f"{verdict.target} [{verdict.policy or 'no policy'}]", len(verdict.invariants)
        )
        if verdict.declarations:  # a CI report shows what a pass was excused
            listed = ElementTree.SubElement(suite, "properties")
            for e in verdict.declarations:
                name, value = f"declaration.{e.declaration}", e.describe()
                ElementTree.SubElement(listed, "property", name=name, value=value)
        for row in verdict.invariants:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=(
                    f"kvsched.{verdict.kind.replace(' ', '_')}.{verdict.policy or 'any'}"
                    f".{row.layer}"
                ),
                name=f"{row.invariant} {row.title}",
            )
            finding = verdict.finding_for(row.invariant)
            if row.status == VIOLATED and finding is not None:
                details = explain(verdict, reproduce) if finding is verdict.finding else ""
                _failure(suite, case, finding.message, details or finding.message)
            elif row.status in (NOT_APPLICABLE, NOT_CHECKED):
                ElementTree.SubElement(case, "skipped", message=f"{row.status}: {row.how}")
                suite.set("skipped", str(int(suite.get("skipped", "0")) + 1))
            else:
                ElementTree.SubElement(case, "system-out").text = f"{row.status}: {row.how}"
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(
        root, encoding="unicode"
    )


def _suite(root: ElementTree.Element, name: str, tests: int) -> ElementTree.Element:
    return ElementTree.SubElement(
        root, "testsuite", name=name, tests=str(tests), failures="0", errors="0", skipped="0"
    )


def _failure(
    suite: ElementTree.Element, case: ElementTree.Element, message: str, details: str
) -> None:
    ElementTree.SubElement(case, "failure", message=message).text = details
    suite.set("failures", str(int(suite.get("failures", "0")) + 1))
