"""What a report says, as blocks :mod:`.render` writes out: tables, plots, comparison, gate.

The order is the reader's: how to regenerate it, the gate's verdict if there is one, then per
workload the story of the policies, the metric table and the plots, then the comparison with the
baseline. Nothing here depends on the time or the machine, so the same inputs give the same
report byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.workload import Workload

from .collect import FAST, CaseRun
from .compare import Comparison, format_percent
from .figures import Plot
from .gate import GateVerdict
from .render import Block, Bullets, Code, Heading, Image, Paragraph, Table
from .results import ResultSet
from .story import lesson_comparison, policy_story


@dataclass(frozen=True)
class ReportContent:
    name: str
    command: str
    """The command line that regenerates the report."""
    results: ResultSet
    cases: tuple[CaseRun, ...] = ()
    """The runs behind ``results``; empty when the figures were read from asv results."""
    plots: tuple[tuple[str, tuple[Plot, ...]], ...] = ()
    """Per workload name, its plots in display order."""
    comparison: Comparison | None = None
    verdict: GateVerdict | None = None
    teaching: Workload | None = None
    """The teaching trace, to recognise it among the workloads and add the lesson's figures."""


def compose(content: ReportContent) -> list[Block]:
    blocks: list[Block] = [
        Heading(f"kvsched report: {content.name}", 1),
        Paragraph("Regenerate this report, from the repository root, with:"),
        Code(content.command),
        Paragraph(f"Figures from {content.results.source}."),
    ]
    if content.verdict is not None:
        blocks.append(Paragraph(_verdict_line(content.verdict)))
    if content.cases:
        plots = dict(content.plots)
        for workload, cases in _by_workload(content.cases):
            blocks += _workload_section(workload, cases, plots.get(workload.name, ()), content)
    else:
        blocks += _figures_section(content.results)
    if content.comparison is not None:
        blocks += _comparison_section(content.comparison, content.verdict)
    return blocks


def format_value(value: float) -> str:
    """Integers as integers, other values to four decimals without trailing zeros."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _by_workload(cases: Sequence[CaseRun]) -> list[tuple[Workload, list[CaseRun]]]:
    grouped: dict[str, tuple[Workload, list[CaseRun]]] = {}
    for case in cases:
        grouped.setdefault(case.workload.name, (case.workload, []))[1].append(case)
    return list(grouped.values())


def _workload_section(
    workload: Workload, cases: list[CaseRun], plots: Sequence[Plot], content: ReportContent
) -> list[Block]:
    limits = workload.limits
    about = (
        f"{len(workload.requests)} requests; batch limit {limits.batch_limit}, pages of "
        f"{limits.page_size} token slots, a pool of {limits.pool_pages} pages."
    )
    if workload.description:
        about += f" {workload.description}"
    blocks: list[Block] = [Heading(f"Workload `{workload.name}`"), Paragraph(about)]
    if any(case.engine == FAST for case in cases):
        blocks.append(
            Paragraph(
                "Run on the event-jumping fast path (`kvsched.reference.fastpath`), which gives "
                "the stepped engine's metrics exactly but keeps no per-iteration figures, so "
                "the slot strip and the pages plot are left out."
            )
        )
    blocks += [
        Paragraph(f"**Partial figures** for `{case.policy}`: {case.problem}.")
        for case in cases
        if case.problem
    ]
    by_policy = {case.policy: case for case in cases}
    if "static" in by_policy and "continuous" in by_policy:
        static, continuous = by_policy["static"], by_policy["continuous"]
        blocks.append(Heading("Static against continuous batching", 3))
        blocks += policy_story(static, continuous)
        if content.teaching is not None and workload == content.teaching:
            blocks += lesson_comparison(static, continuous)
    blocks.append(Heading("Metrics", 3))
    blocks.append(_metric_table(cases))
    for plot in plots:
        blocks += [Heading(plot.title, 3), Image(plot)]
    return blocks


def _metric_table(cases: Sequence[CaseRun]) -> Table:
    results = [case.result for case in cases]
    rows = tuple(
        (
            f"`{metric}`",
            results[0].units.get(metric, ""),
            *(format_value(r.metrics[metric]) for r in results),
        )
        for metric in results[0].metrics
    )
    return Table(("metric", "unit", *(case.policy for case in cases)), rows)


def _figures_section(results: ResultSet) -> list[Block]:
    rows = tuple(
        (case.label, f"`{metric}`", format_value(value), case.units.get(metric, ""))
        for case in results.cases
        for metric, value in case.metrics.items()
    )
    blocks: list[Block] = [Heading("Figures")]
    blocks.append(
        Table(("case", "metric", "value", "unit"), rows)
        if rows
        else Paragraph("The results hold no figures.")
    )
    if results.failed:
        listed = ", ".join(
            f"`{workload} / {policy}`: `{metric}`" if policy else f"`{workload}`: `{metric}`"
            for workload, policy, metric in results.failed
        )
        blocks.append(Paragraph(f"No value (the benchmark failed): {listed}."))
    return blocks


def _comparison_section(comparison: Comparison, verdict: GateVerdict | None) -> list[Block]:
    blocks: list[Block] = [
        Heading("Baseline against candidate"),
        Bullets(
            (
                f"baseline: {comparison.baseline_source}",
                f"candidate: {comparison.candidate_source}",
            )
        ),
    ]
    gated = {t.metric for t in verdict.thresholds} if verdict else set()
    breached = {(b.change.label, b.change.metric) for b in verdict.breaches} if verdict else set()
    rows = []
    for change in comparison.changes:
        mark = ""
        if change.metric in gated:
            mark = "**breach**" if (change.label, change.metric) in breached else "ok"
        rows.append(
            (
                change.label,
                f"`{change.metric}`",
                format_value(change.baseline),
                format_value(change.candidate),
                _signed(change.delta),
                format_percent(change),
                mark,
            )
        )
    if rows:
        headers = ("case", "metric", "baseline", "candidate", "change", "change %", "gate")
        blocks.append(Table(headers, tuple(rows)))
    else:
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


def _gate_section(verdict: GateVerdict) -> list[Block]:
    rows = tuple(
        (
            f"`{threshold.text}`",
            threshold.describe(),
            str(checked),
            str(
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


def _verdict_line(verdict: GateVerdict) -> str:
    count = len(verdict.thresholds)
    if verdict.passed:
        return f"**Gate passed**: no regression beyond the {count} threshold(s) below."
    return (
        f"**Gate failed**: {len(verdict.problems)} regression(s) "
        f"or failed benchmark(s) against the {count} "
        "threshold(s) below."
    )


def _signed(delta: float) -> str:
    text = format_value(delta)
    return text if delta < 0 else ("0" if delta == 0 else f"+{text}")
