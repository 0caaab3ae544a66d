"""Rendering a check's :class:`~.report.Report` for machines: JSON and JUnit XML.

Graders and CI read these; their fields and exit codes stay as they are from release to release.

The target's words are data here too, never markup nor a terminal's commands. JSON is written
ASCII only, so no byte of it is a control character; its prose (a finding's message, the notes,
names) is also :func:`~kvsched.spec.text.escaped`, so a grader printing a decoded message shows
kvsched's text, while data meant to be used again (a counterexample's request ids, a finding's
requests) keeps the target's exact strings. JUnit XML must be well-formed XML 1.0 whatever the
target wrote: ElementTree escapes markup, and every text and attribute is escaped before it
(XML 1.0 has no way to write ESC or U+FFFE at all, not even as a character reference).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from typing import Any

from kvsched.checks.monitor.findings import Finding, followed
from kvsched.checks.verdict.render import BY_FIGURE, LINE_LIMIT, explain
from kvsched.checks.verdict.report import (
    INCONCLUSIVE,
    NOT_APPLICABLE,
    NOT_CHECKED,
    VIOLATED,
    Report,
    Verdict,
)
from kvsched.spec.text import cut, describe_event, escaped
from kvsched.spec.workload import workload_to_json


def render_json(report: Report) -> str:
    return json.dumps(report_to_json(report), indent=2, ensure_ascii=True)


def report_to_json(report: Report) -> dict[str, Any]:
    allocator = report.allocator
    return {
        "target": escaped(report.target),
        "ok": report.ok,
        "outcome": report.outcome,
        "exit_code": report.exit_code,
        "inconclusive": [escaped(reason) for reason in report.reasons],
        "seconds": round(report.seconds, 3),
        "allocator": None
        if allocator is None
        else {
            "ok": allocator.ok,
            "calls": allocator.calls,
            "finding": _finding_json(allocator.finding),
            "advice": [escaped(line) for line in allocator.advice],
        },
        "verdicts": [_verdict_json(v) for v in report.verdicts],
        "notes": [escaped(note) for note in report.notes],
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
        "target": escaped(verdict.target),
        "kind": verdict.kind,
        "policy": verdict.policy,
        "ok": verdict.ok,
        "outcome": verdict.outcome,
        "inconclusive": [escaped(reason) for reason in verdict.reasons],
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
            "coverage": evidence.coverage.to_json(),
        },
        "finding": _finding_json(verdict.finding),
        "allocator_finding": _finding_json(verdict.allocator_finding),
        "counterexample": None
        if failing is None
        else {
            "workload": workload_to_json(failing.workload),
            "found_by": escaped(failing.found_by),
            "saved_to": escaped(failing.saved_to),
            "reproduce_blob": failing.reproduce_blob,
        },
        "notes": [escaped(note) for note in verdict.notes],
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
        "message": escaped(finding.message),
        "requests": list(finding.requests),
        "pages": list(finding.pages),
        "recent": [describe_event(e) for e in finding.recent],
        # What the monitor found checking on after it, on the same run: each may follow from it.
        "followed_by": [_finding_json(later) for later in finding.followed_by],
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
    if report.outcome == INCONCLUSIVE:
        # An error, which every CI reads as not passed: too little evidence is no pass.
        suite = _suite(root, f"{report.target} evidence", 1)
        case = ElementTree.SubElement(
            suite, "testcase", classname="kvsched.evidence", name="enough evidence for a pass"
        )
        reasons = "\n".join(report.reasons)
        ElementTree.SubElement(
            case, "error", message="inconclusive", type="inconclusive"
        ).text = reasons
        suite.set("errors", "1")
    for verdict in report.verdicts:
        suite = _suite(
            root, f"{verdict.target} [{verdict.policy or 'no policy'}]", len(verdict.invariants)
        )
        listed = ElementTree.SubElement(suite, "properties")
        ElementTree.SubElement(listed, "property", name="outcome", value=verdict.outcome)
        for key, figure in verdict.evidence.coverage.to_json().items():
            if figure is not None:
                name = f"coverage.{key}"
                ElementTree.SubElement(listed, "property", name=name, value=str(figure))
        ElementTree.SubElement(
            listed,
            "property",
            name="coverage.hypothesis_examples",
            value=str(verdict.evidence.hypothesis_examples),
        )
        if verdict.finding is not None and verdict.finding.followed_by:
            # The first violation's testcase fails; these were found after it and may follow.
            after = f"{verdict.finding.invariant}: {followed(verdict.finding)}"
            ElementTree.SubElement(listed, "property", name="followed_by", value=after)
        for e in verdict.declarations:  # a CI report shows what a pass was excused
            excused = f"declaration.{e.declaration}"
            ElementTree.SubElement(listed, "property", name=excused, value=e.describe())
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
    # The totals, and the time: the check is timed whole, not per invariant, so a testcase has
    # no time of its own; a lone suite is the whole check.
    suites = root.findall("testsuite")
    for total in ("tests", "failures", "errors", "skipped"):
        root.set(total, str(sum(int(suite.get(total, "0")) for suite in suites)))
    root.set("time", f"{report.seconds:.3f}")
    if len(suites) == 1:
        suites[0].set("time", f"{report.seconds:.3f}")
    for element in root.iter():
        _well_formed(element)
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
    shown = cut(message, LINE_LIMIT)  # a log's fault message can be any length, as in a terminal
    ElementTree.SubElement(case, "failure", message=shown).text = details
    suite.set("failures", str(int(suite.get("failures", "0")) + 1))


def _well_formed(element: ElementTree.Element) -> None:
    """``element``'s text and attributes escaped: what XML 1.0 forbids (ESC, U+FFFE, a lone
    surrogate) made visible, at the one place every string of the report passes."""
    if element.text:
        element.text = escaped(element.text)
    for name, value in list(element.attrib.items()):
        element.set(name, escaped(value))
