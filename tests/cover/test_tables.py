"""Every command's table fits 100 columns: a wide one folds its widest columns onto more lines,
never cutting a word or a figure (the mutants table was once about 210 columns wide)."""

from __future__ import annotations

import re

import pytest
from tabulate import tabulate

from kvsched.checks.mutants.run import MutantOutcome
from kvsched.checks.mutants.zoo import ZOO
from kvsched.cli import main
from kvsched.commands.mutants import outcome_table
from kvsched.reference.engine_scheduler import CONFIGS
from kvsched.reports.text_table import WIDTH, text_table


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def words(text: str) -> list[str]:
    """The pieces a fold may put on lines of their own: words, split after their hyphens."""
    return re.findall(r"[^\s-]+-?|-", text)


def test_the_mutants_table_of_the_whole_zoo_fits_and_shows_every_word() -> None:
    outcomes = [MutantOutcome(m.name, m.bug, m.expected, (m.expected,), 123.456) for m in ZOO]
    missed = ZOO[0]
    outcomes.append(
        MutantOutcome(missed.name, missed.bug, missed.expected, ("PAGE-1", "LIVE-2", "BATCH-3"), 1)
    )
    table = outcome_table(outcomes)
    assert widest(table) <= WIDTH
    for outcome in outcomes:
        for word in words(f"{outcome.name} {outcome.bug} {' '.join(outcome.reported)}"):
            assert word in table, word
    # One row per mutant: its verdict and seconds stand on the row's first line.
    firsts = [line for line in table.splitlines() if re.search(r"\b(yes|NO)\s+\d+\.\d\d$", line)]
    assert len(firsts) == len(outcomes)
    assert firsts[-1].split()[-2:] == ["NO", "1.00"]


def test_a_table_that_fits_is_drawn_as_tabulate_draws_it() -> None:
    rows = [("a", "1"), ("b", "22")]
    drawn = tabulate(rows, headers=["name", "figure"], tablefmt="simple", disable_numparse=True)
    assert text_table(rows, ["name", "figure"]) == drawn


def test_a_wide_table_folds_its_widest_column_and_keeps_every_figure() -> None:
    figures = ["1,234,567.89", "98.7%", "n/a"]
    rows = [(f"{'word ' * 30}{end}", *figures) for end in "xyz"]
    table = text_table(rows, ["text", "big", "share", "none"], width=60)
    assert widest(table) <= 60
    for figure in figures:
        assert table.count(figure) == 3  # never split across lines


@pytest.mark.parametrize("timeline", ["none", "changes"])
def test_the_replay_table_beside_every_design_fits(
    capsys: pytest.CaptureFixture[str], timeline: str
) -> None:
    designs = [option for name in sorted(CONFIGS) for option in ("--design", name)]
    assert main(["replay", "--timeline", timeline, *designs]) == 0
    shown = capsys.readouterr().out
    table = shown[: shown.index("\n\n", shown.index("metric"))]
    assert widest(table) <= WIDTH
    note = shown[shown.index("utilization: tokens") :].split("\n\n")[0]
    assert widest(note) <= WIDTH
