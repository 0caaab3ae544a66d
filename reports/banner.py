"""The verdict, first on the page: the gate's outcome, what breached, where the figures are from.

A team lead opening a CI artifact should not scroll for the answer. The banner states the
outcome (:data:`kvsched.spec.vocabulary.GATE_OUTCOMES`), which the page title repeats; every
breached metric with its baseline and candidate values and the threshold it broke; figures that
could not be judged; and the provenance: the baseline's path, the candidate's name, kvsched's
version, the git commit and the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.vocabulary import GateOutcome

from . import numbers
from .gate import GateVerdict
from .provenance import Provenance
from .render import Banner, Table

BANNER_ROWS = 8
"""Breaches the banner lists; more would push it past the first screen, so the rest are counted
(the comparison below lists them all)."""
BANNER_LINES = 3
"""Likewise for each kind of note: figures not judged, runs not complete, warnings."""


@dataclass(frozen=True)
class Subject:
    """What the banner names: the report's inputs, not its figures."""

    candidate: str
    """The report's name and where its figures come from."""
    provenance: Provenance
    baseline: str = ""
    """The baseline as given on the command line (a path, optionally @COMMIT); empty for none."""


def outcome_of(verdict: GateVerdict | None, incomplete: Sequence[str]) -> GateOutcome:
    if verdict is None:
        return "incomplete" if incomplete else "not gated"
    if verdict.breaches:
        return "failed"
    return "passed" if verdict.passed else "incomplete"


HEADLINES: dict[GateOutcome, str] = {
    "passed": "Gate passed",
    "failed": "Gate failed",
    "incomplete": "Gate incomplete",
    "not gated": "Not gated",
}


def banner(
    verdict: GateVerdict | None,
    incomplete: Sequence[str],
    subject: Subject,
    warnings: Sequence[str] = (),
) -> tuple[GateOutcome, Banner]:
    """The banner, and its outcome for the page title; ``warnings`` are the comparison's."""
    outcome = outcome_of(verdict, incomplete)
    headline = f"{HEADLINES[outcome]}: {_summary(outcome, verdict, incomplete)}"
    table = _breaches(verdict) if verdict is not None and verdict.breaches else None
    facts = []
    if verdict is not None:
        facts += _first(
            [f"not judged: {problem}" for problem in verdict.problems[len(verdict.breaches) :]]
        )
    elif incomplete:
        facts += _first([f"not complete: {problem}" for problem in incomplete])
    facts += _first([f"warning: {warning}" for warning in warnings])
    p = subject.provenance
    facts += [
        f"baseline: `{subject.baseline}`" if subject.baseline else "baseline: none given",
        f"candidate: {subject.candidate}",
        f"kvsched {p.version}, commit {p.commit_words}, made {p.time_words}",
    ]
    return outcome, Banner(outcome, headline, table, tuple(facts))


def _summary(outcome: GateOutcome, verdict: GateVerdict | None, incomplete: Sequence[str]) -> str:
    if verdict is None:
        if incomplete:
            runs = numbers.counted(len(incomplete), "run")
            return f"{runs} did not complete; no threshold was given"
        return "no --fail-on threshold was given"
    thresholds = numbers.counted(len(verdict.thresholds), "threshold")
    if outcome == "failed":
        return f"{numbers.counted(len(verdict.breaches), 'breach', 'breaches')} of {thresholds}"
    if outcome == "incomplete":
        missing = len(verdict.problems)
        return f"no breach, but {numbers.counted(missing, 'figure')} could not be judged"
    return f"no regression beyond {thresholds} ({numbers.counted(sum(verdict.checked), 'check')})"


def _breaches(verdict: GateVerdict) -> Table:
    rows = []
    for breach in verdict.breaches[:BANNER_ROWS]:
        change = breach.change
        unit = change.unit
        shown = numbers.values((change.baseline, change.candidate), unit)
        moved = (
            numbers.signed_percent(change.percent)
            if breach.threshold.percent
            else numbers.signed(change.delta, unit, (change.baseline, change.candidate))
        )
        rows.append(
            (change.label, f"`{change.metric}`", *shown, moved, f"`{breach.threshold.text}`")
        )
    left = len(verdict.breaches) - BANNER_ROWS
    if left > 0:
        more = numbers.counted(left, "more breach", "more breaches")
        rows.append((f"and {more}, listed below", "", "", "", "", ""))
    headers = ("case", "metric", "baseline", "candidate", "change", "threshold")
    return Table(headers, tuple(rows))


def _first(lines: list[str]) -> list[str]:
    """At most BANNER_LINES of a kind; the rest are counted, and listed in the sections below."""
    if len(lines) <= BANNER_LINES:
        return lines
    kept = lines[: BANNER_LINES - 1]
    return [*kept, f"and {numbers.count(len(lines) - len(kept))} more of these, listed below"]
