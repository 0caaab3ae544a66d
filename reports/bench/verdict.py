"""The bench gate: only the deterministic ``track_*`` figures of the teaching trace and the
workload families decide; times and memory vary by tens of percent on shared cores and are
shown for information."""

from __future__ import annotations

from dataclasses import dataclass

from tabulate import tabulate

GATED_MODULES = ("teaching", "families")
HIGHER_IS_BETTER = ("track_utilization",)
"""Gated figures for which a rise is an improvement; for every other one a rise is worse."""


@dataclass(frozen=True)
class Row:
    """One line of ``asv compare``'s table."""

    mark: str  # asv's: '+' larger, '-' smaller, '!' now failing, 'x' not comparable, '*' fixed
    before: str
    after: str
    ratio: str
    name: str

    @property
    def method(self) -> str:
        return self.name.split("(")[0].rpartition(".")[2]

    @property
    def gated(self) -> bool:
        return self.name.partition(".")[0] in GATED_MODULES and self.method.startswith("track_")

    @property
    def worse(self) -> bool:
        return self.mark == "!" or self.mark == ("-" if self.method in HIGHER_IS_BETTER else "+")


@dataclass(frozen=True)
class GateResult:
    gated: tuple[Row, ...]
    worse: tuple[Row, ...]
    better: tuple[Row, ...]

    def describe(self) -> str:
        modules = ",".join(GATED_MODULES)
        lines = [
            f"Gate on the exact track_* figures of benchmarks/{{{modules}}}.py: "
            f"{len(self.gated)} compared, {len(self.worse)} worse, "
            f"{len(self.better)} better or newly passing."
        ]
        lines += [f"  WORSE   {row.name}: {row.before} -> {row.after}" for row in self.worse]
        lines += [f"  better  {row.name}: {row.before} -> {row.after}" for row in self.better]
        return "\n".join(lines)


def parse_compare(output: str) -> list[Row]:
    """The rows of the tables ``asv compare --split`` prints (tabulate's github format)."""
    rows = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 5 or cells[0] == "Change":
            continue
        if cells[0].startswith("--"):  # the |----|----| rule under the header
            continue
        name = cells[4].split(" [")[0]  # several environments add " [machine/env]"
        rows.append(Row(cells[0], cells[1], cells[2], cells[3], name))
    return rows


def gate(rows: list[Row]) -> GateResult:
    gated = tuple(row for row in rows if row.gated)
    worse = tuple(row for row in gated if row.worse)
    better = tuple(row for row in gated if row.mark in ("+", "-", "*") and not row.worse)
    return GateResult(gated, worse, better)


def information(rows: list[Row], factor: float) -> str:
    """Times, memory and ratios: shown, never gated."""
    shown = [[r.mark, r.before, r.after, r.ratio, r.name] for r in rows if not r.gated]
    if not shown:
        return "(no time or memory benchmarks in this selection)"
    title = f"Time and memory, for information (asv marks changes beyond x{factor:g}):"
    headers = ["", "base", "candidate", "ratio", "benchmark"]
    return f"{title}\n{tabulate(shown, headers=headers, tablefmt='github')}"
