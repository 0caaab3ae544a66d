"""Rendering a check's :class:`~.report.Report` for a person (JSON and JUnit: :mod:`.machine`).

The outcome comes first, in one line, because it is what every reader wants. A violation follows
in words a learner understands: what broke, the smallest workload that shows it (request by
request), the last iterations before it, and the command that replays it. Then the invariants,
folded: violations row by row, the rest one line per verdict and way of checking; ``verbose``
lists every row.

Whatever came from the target (its name, an exception's text, a log's ids) is shown escaped
(:func:`~kvsched.spec.text.escaped`), names and ids on one line, so the first line is kvsched's
verdict however hostile the target's words; a message's line longer than :data:`LINE_LIMIT` is
cut there, saying by how much.
"""

from __future__ import annotations

from collections import Counter

from tabulate import tabulate

from kvsched.checks.monitor.findings import Finding, followed
from kvsched.checks.search.runs import ALLOCATOR_BITS
from kvsched.checks.verdict.report import (
    HOLDS,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    NOT_CHECKED,
    VIOLATED,
    AllocatorVerdict,
    InvariantVerdict,
    Report,
    Verdict,
)
from kvsched.spec.invariants import BY_ID, EFFICIENCY, LAYERS, layer_of
from kvsched.spec.text import (
    TEXT_LIMIT,
    cut,
    describe_event,
    describe_workload,
    escaped,
    one_line,
    plural,
)
from kvsched.spec.vocabulary import is_policy

BY_FIGURE = {figure.id: figure for figure in EFFICIENCY}

LINE_LIMIT = 2 * TEXT_LIMIT
"""The longest line of a finding's message shown: a log's fault message is the log's own text,
as long as its writer made it, and a person's terminal is no place for all of it. Twice the
limit of one text of the target's, so that one already cut keeps the words around it and the
count of what its cut took."""


def render_table(report: Report, reproduce: str = "", verbose: bool = False) -> str:
    """The report for a person: the outcome in one line, then each finding with its smallest
    workload, then the invariants folded to what matters (every row with ``verbose``).
    ``reproduce`` is the command line to rerun, without --workload."""
    blocks: list[str] = [headline(report)]
    if report.grade is not None:
        blocks.append(report.grade.describe())
    if report.allocator is not None:
        blocks.append(allocator_line(report.allocator))
        if report.allocator.advice:
            blocks.append(
                "Advice, not graded (inputs outside the exercise's domain are the caller's "
                "responsibility; --strict-inputs grades them):\n"
                + "\n".join(f"  {line}" for line in report.allocator.advice)
            )
    if report.outcome == INCONCLUSIVE:
        blocks.append(
            "Inconclusive (exit 4): no violation was found, but a pass needs more evidence:\n"
            + "\n".join(f"  - {reason}" for reason in report.reasons)
        )
    for verdict in report.verdicts:
        blocks.append(_render_verdict(verdict, reproduce, verbose))
    limits = report.grade.limits if report.grade is not None else None
    blocks.extend(note for note in report.notes if note != limits)  # stated at the top
    return escaped("\n\n".join(blocks))  # the last word on anything a path left unescaped


def headline(report: Report) -> str:
    """The whole outcome in one line: PASS or FAIL, the first finding in words, the time."""
    took = f"({report.seconds:.1f} s)"
    if report.outcome == INCONCLUSIVE:
        reasons = report.reasons
        others = f"; {plural(len(reasons) - 1, 'more reason')} below" if len(reasons) > 1 else ""
        reason = one_line(cut(escaped(reasons[0]).splitlines()[0].rstrip("."), LINE_LIMIT))
        said = f"too little evidence for a pass: {reason}{others}"
        return f"INCONCLUSIVE  {one_line(report.target)}: {said} {took}"
    if report.ok:
        undeclared = any(
            not is_policy(v.policy) and any(r.status == NOT_APPLICABLE for r in v.invariants)
            for v in report.verdicts
        )
        outcome = (
            "every invariant checked holds; some were not checked (no policy declared)"
            if undeclared
            else "every invariant holds"
        )
        return f"PASS  {one_line(report.target)}: {outcome} {took}"
    first: Finding | None = report.allocator.finding if report.allocator is not None else None
    where = "allocate_kv_pages"
    failed = [v for v in report.verdicts if v.failed]
    if first is None:
        verdict = failed[0]
        first = verdict.finding or verdict.allocator_finding
        where = f"{verdict.policy} batching" if verdict.policy else "no declared policy"
    assert first is not None
    # Each verdict with a finding of its own, past the first one told here.
    more = sum(v.finding is not None for v in failed) - (where != "allocate_kv_pages")
    also = f"; {plural(more, 'more finding')} below" if more > 0 else ""
    # Escaped before it is split: splitlines() breaks at \r, \x1c and \u2028 too.
    message = one_line(cut(escaped(first.message).splitlines()[0].rstrip("."), LINE_LIMIT))
    # The allocator is called directly, in no iteration: its finding has no "when".
    when = "" if where == "allocate_kv_pages" else _when(first)
    said = f"VIOLATION found: {first.invariant}{when} ({where}): {message}"
    return f"FAIL  {one_line(report.target)}: {said}{also} {took}"


def allocator_line(allocator: AllocatorVerdict) -> str:
    """The verdict on a learner's ``allocate_kv_pages``, known before anything else."""
    if allocator.finding is None:
        return (
            f"allocate_kv_pages: holds on {plural(allocator.calls, 'input')} "
            f"(exact values from 0 tokens to 2**{ALLOCATOR_BITS}, full and partial pages; "
            "section 2)"
        )
    finding = allocator.finding
    return (
        f"allocate_kv_pages: VIOLATES {finding.invariant} ({BY_ID[finding.invariant].title})"
        f"\n  {finding.message}"
    )


def _render_verdict(verdict: Verdict, reproduce: str, verbose: bool) -> str:
    policy = f"{verdict.policy} batching" if verdict.policy else "no declared policy"
    counts = Counter(row.status for row in verdict.invariants)
    tally = ", ".join(
        _counted(counts[status], status)
        for status in (VIOLATED, HOLDS, NOT_CHECKED, NOT_APPLICABLE)
        if counts[status]
    )
    parts = [f"{one_line(verdict.target)} ({verdict.kind}, {policy}): {tally}"]
    if verdict.finding is not None:
        parts.append(explain(verdict, reproduce).lstrip("\n") + "\n")
    # Rows by layer, in the catalogue's order of layers: safety, liveness, conformance.
    ordered = sorted(verdict.invariants, key=lambda row: LAYERS.index(layer_of(row.invariant)))
    shown = ordered if verbose else [row for row in ordered if row.status == VIOLATED]
    if shown:
        rows = [(row.invariant, row.layer, row.status, row.how) for row in shown]
        headers = ["invariant", "layer", "verdict", "how checked"]
        parts.append(tabulate(rows, headers=headers, tablefmt="simple"))
    if not verbose:
        parts.extend(_folded(ordered))
    parts.extend(verdict.notes)
    if verdict.declarations:
        parts.append("Declarations that took out or relaxed a check, and what they excused:")
        parts.extend(f"  {excuse.describe()}" for excuse in verdict.declarations)
    if verdict.efficiency:
        parts.append(_efficiency_line(verdict))
    parts.append(f"Coverage: {verdict.evidence.coverage.describe()}.")
    return "\n".join(parts)


def _counted(count: int, status: str) -> str:
    """``1 holds``, ``18 hold``, ``17 not checked``: a count of invariants with their verdict."""
    return f"{count} {'hold' if status == HOLDS and count != 1 else status}"


def _folded(rows: list[InvariantVerdict]) -> list[str]:
    """The rows that are not violations, one line per verdict and way of checking."""
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        if row.status != VIOLATED:
            groups.setdefault((row.status, row.how), []).append(row.invariant)
    order = (HOLDS, NOT_CHECKED, NOT_APPLICABLE)
    return [
        f"{_counted(len(ids), status)}: {', '.join(ids)} ({how})"
        for (status, how), ids in sorted(groups.items(), key=lambda item: order.index(item[0][0]))
    ] + (["(--verbose lists every invariant with how it was checked)"] if groups else [])


def _efficiency_line(verdict: Verdict) -> str:
    figures = "; ".join(
        f"{BY_FIGURE[figure].title.lower()} {value}" for figure, value in verdict.efficiency
    )
    return f"Efficiency on {verdict.efficiency_on} (measured, never a violation): {figures}."


def _when(finding: Finding) -> str:
    if finding.iteration:
        return f" in iteration {finding.iteration}"
    # iteration 0: decided at the end of the run, or a call outside any iteration
    return "" if finding.invariant == "PROTO-1" else " at the end of the run"


def followed_lines(finding: Finding) -> list[str]:
    """What the monitor found after ``finding`` on the same run, checking on: one line each,
    led by the sentence that says they are named after it because they may follow from it."""
    if not finding.followed_by:
        return []
    lines = [
        "",
        f"Followed by {followed(finding)}: found checking on after it, on the same run; "
        f"fix {finding.invariant} first, as these may follow from it.",
    ]
    for later in finding.followed_by:
        first_line = escaped(later.message).splitlines()[0] if later.message else ""
        lines.append(f"  {later.invariant} ({later.where}): {cut(first_line, LINE_LIMIT)}")
    return lines


def explain(verdict: Verdict, reproduce: str = "") -> str:
    """A violation in words: what broke, on which smallest workload, and how to replay it."""
    finding = verdict.finding
    assert finding is not None
    lines = [
        "",
        f"{finding.invariant} violated{_when(finding)}: {BY_ID[finding.invariant].title}.",
        *(f"  {cut(line, LINE_LIMIT)}" for line in escaped(finding.message).splitlines()),
        *followed_lines(finding),
    ]
    failing = verdict.counterexample
    if failing is not None:
        lines.append("")
        if verdict.kind == "event log":  # a recording is what it is: nothing was shrunk
            lines.append(f"The workload of {one_line(failing.found_by)}:")
        else:
            lines.append(f"Smallest failing workload ({one_line(failing.found_by)}):")
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
    if failing is not None and failing.reproduce_blob and not failing.saved_to:
        # The workload file replays it exactly; the blob (in --json) is for a search's own replay.
        lines.append(f"Hypothesis reproduce blob: {failing.reproduce_blob}")
    return escaped("\n".join(lines))
