"""The baseline-against-candidate section: what moved and what the gate checked, first.

Rows a threshold gates or whose value changed come first; the unchanged rest is folded away
under one line that counts them, so a reader sees the few rows that matter, not a long table
of zeros.
"""

from __future__ import annotations

from kvsched.spec.text import plural

from . import numbers
from .compare import Comparison, MetricChange
from .gate import GateVerdict
from .render import Block, Bullets, Folded, Heading, Paragraph, Table

HEADERS = ("case", "metric", "baseline", "candidate", "change", "change %", "gate")


def comparison_section(comparison: Comparison, verdict: GateVerdict | None) -> list[Block]:
    blocks: list[Block] = [
        Heading("Baseline against candidate", anchor="comparison"),
        Bullets(
            (
                f"baseline: {comparison.baseline_source}",
                f"candidate: {comparison.candidate_source}",
            )
        ),
    ]
    gated = {t.metric for t in verdict.thresholds} if verdict else set()
    breached = {(b.change.label, b.change.metric) for b in verdict.breaches} if verdict else set()
    first: list[tuple[str, ...]] = []
    rest: list[tuple[str, ...]] = []
    for change in comparison.changes:
        mark = ""
        if change.metric in gated:
            mark = "**breach**" if (change.label, change.metric) in breached else "ok"
        row = _row(change, mark)
        (first if mark or change.delta != 0 else rest).append(row)
    if first:
        blocks.append(Table(HEADERS, tuple(first)))
    elif comparison.changes:
        blocks.append(Paragraph("No figure changed and no threshold was given."))
    if rest:
        summary = f"{plural(len(rest), 'unchanged row')}, neither gated nor changed"
        blocks.append(Folded(summary, Table(HEADERS, tuple(rest))))
    if not comparison.changes:
        blocks.append(Paragraph("No case is in both the baseline and the candidate."))
    if comparison.only_in_baseline:
        listed = ", ".join(f"`{label}`" for label in comparison.only_in_baseline)
        blocks.append(Paragraph(f"Only in the baseline (not compared): {listed}."))
    if comparison.failed_in_candidate:
        listed = ", ".join(
            f"`{label}`: `{metric}`" for label, metric in comparison.failed_in_candidate
        )
        blocks.append(Paragraph(f"Failed in the candidate (no value): {listed}."))
    if comparison.only_in_candidate:
        listed = ", ".join(f"`{label}`" for label in comparison.only_in_candidate)
        blocks.append(Paragraph(f"New in the candidate (not compared): {listed}."))
    for warning in comparison.warnings:
        blocks.append(Paragraph(f"Warning: {warning}."))
    if verdict is not None:
        blocks += _gate_section(verdict)
    return blocks


def _row(change: MetricChange, mark: str) -> tuple[str, ...]:
    pair = (change.baseline, change.candidate)
    return (
        change.label,
        f"`{change.metric}`",
        *numbers.values(pair, change.unit),
        numbers.signed(change.delta, change.unit, pair),
        numbers.signed_percent(change.percent),
        mark,
    )


def _gate_section(verdict: GateVerdict) -> list[Block]:
    rows = tuple(
        (
            f"`{threshold.text}`",
            threshold.describe(),
            numbers.count(checked),
            numbers.count(
                sum(1 for b in verdict.breaches if b.threshold == threshold)
                + sum(1 for t, _ in verdict.failures if t == threshold)
            ),
        )
        for threshold, checked in zip(verdict.thresholds, verdict.checked, strict=True)
    )
    blocks: list[Block] = [
        Heading("Gate", 3),
        Table(("threshold", "meaning", "cases checked", "breaches"), rows),
    ]
    if verdict.problems:
        blocks.append(Bullets(tuple(verdict.problems)))
    return blocks
