"""What a report says, as blocks :mod:`.render` writes out: verdict, comparison, tables, plots.

The order is the reader's: the verdict banner (:mod:`.banner`), then for several workloads a
contents list and one overview table (:mod:`.overview`), how to regenerate the report, the
comparison with the baseline, gated and changed rows first (:mod:`.comparison_view`), then per
workload the story of the policies, what the run shows (:mod:`.observations`), the metric table
and the plots. Only the banner's provenance depends on the time and the checkout, so the same
inputs, commit and ``SOURCE_DATE_EPOCH`` give the same report byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.vocabulary import GateOutcome
from kvsched.spec.workload import Workload

from . import numbers
from .banner import Subject, banner
from .collect import FAST, CaseRun
from .compare import Comparison
from .comparison_view import comparison_section
from .crowd import CROWD_FROM
from .figures import Plot
from .gate import GateVerdict
from .observations import backlog, memory_binds, occupancy
from .overview import anchor, contents_and_overview
from .provenance import Provenance
from .render import Block, Code, Heading, Image, Paragraph, Table
from .results import ResultSet
from .story import lesson_comparison, policy_story

NO_SUBJECT = Subject("", Provenance("unknown"))


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
    subject: Subject = NO_SUBJECT
    """What the banner names: candidate, baseline, version, commit, time."""


def compose(content: ReportContent) -> tuple[GateOutcome, list[Block]]:
    """The page's outcome (for its title) and its blocks, verdict first."""
    incomplete = [
        f"{c.policy} on {c.workload.name}: {c.problem}" for c in content.cases if c.problem
    ]
    warnings = content.comparison.warnings if content.comparison else ()
    outcome, verdict_banner = banner(content.verdict, incomplete, content.subject, warnings)
    blocks: list[Block] = [verdict_banner, Heading(f"kvsched report: {content.name}", 1)]
    groups = _by_workload(content.cases)
    if len(groups) > 1:
        blocks += contents_and_overview(groups, content.comparison is not None)
    blocks += [
        Paragraph("Regenerate this report, from the repository root, with:"),
        Code(content.command),
        Paragraph(f"Figures from {content.results.source}."),
    ]
    if content.comparison is not None:
        blocks += comparison_section(content.comparison, content.verdict)
    if content.cases:
        plots = dict(content.plots)
        for workload, cases in groups:
            blocks += _workload_section(workload, cases, plots.get(workload.name, ()), content)
    else:
        blocks += _figures_section(content.results)
    return outcome, blocks


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
        f"{numbers.counted(len(workload.requests), 'request')}; batch limit "
        f"{numbers.count(limits.batch_limit)}, pages of {limits.page_size} token slots, a pool "
        f"of {numbers.counted(limits.pool_pages, 'page')}."
    )
    if workload.description:
        about += f" {workload.description}"
    blocks: list[Block] = [
        Heading(f"Workload `{workload.name}`", anchor=anchor(workload.name)),
        Paragraph(about),
    ]
    if any(case.engine == FAST for case in cases):
        blocks.append(
            Paragraph(
                "Run on the event-jumping fast path (`kvsched.reference.fastpath`), which gives "
                "the stepped engine's metrics exactly but keeps no per-iteration figures, so "
                + (
                    "the pages plot is left out; the timeline counts requests from when each "
                    "was admitted and finished."
                    if len(workload.requests) > CROWD_FROM
                    else "the slot strip and the pages plot are left out."
                )
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
    blocks += [
        Paragraph(sentence)
        for case in cases
        for sentence in (memory_binds(case), backlog(case))
        if sentence
    ]
    blocks.append(Heading("Metrics", 3))
    blocks.append(_metric_table(cases))
    for plot in plots:
        blocks += [Heading(plot.title, 3), Image(plot)]
    return blocks


def _metric_table(cases: Sequence[CaseRun]) -> Table:
    """Every metric, one row each, with pool occupancy beside utilization."""
    results = [case.result for case in cases]
    rows = []
    for metric in results[0].metrics:
        unit = results[0].units.get(metric, "")
        row = [r.metrics.get(metric, math.nan) for r in results]
        rows.append((f"`{metric}`", _unit(unit), *numbers.values(row, unit)))
        if metric == "utilization":
            rows += _occupancy_rows(cases)
    return Table(("metric", "unit", *(case.policy for case in cases)), tuple(rows))


def _occupancy_rows(cases: Sequence[CaseRun]) -> list[tuple[str, ...]]:
    seen = [occupancy(case) for case in cases]
    peak = ("pool occupancy, peak", "% of pool", *(numbers.percent(o.peak) for o in seen))
    mean = (
        "pool occupancy, mean",
        "% of pool",
        *("n/a" if o.mean is None else numbers.percent(o.mean) for o in seen),
    )
    return [peak, mean]


def _unit(unit: str) -> str:
    return "%" if unit == numbers.FRACTION_UNIT else unit


def _figures_section(results: ResultSet) -> list[Block]:
    rows = tuple(
        (
            case.label,
            f"`{metric}`",
            numbers.value(value, case.units.get(metric, "")),
            _unit(case.units.get(metric, "")),
        )
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
