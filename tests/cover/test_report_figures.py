"""One number per figure in a report: its captions and its story say what its table says.

A caption once counted "idle slot-iterations" its own way (every free slot while anyone waited,
77 on the teaching trace) beside the table's EFF-1 (a fitting request waited, 55). Each figure
that a caption or the opening story names is read back here from the report's Markdown and
compared with the metrics table of the same report.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvsched.cli import main


def _table(markdown: str) -> dict[str, dict[str, str]]:
    """The metrics table: figure -> policy -> cell, as printed."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| metric "))
    policies = [cell.strip() for cell in lines[start].strip("|").split("|")][2:]
    table: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[cells[0].strip("`")] = dict(zip(policies, cells[2:], strict=True))
    return table


def _captions(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("*") and line.endswith("*")]


@pytest.mark.parametrize(
    "workload", ["", "family:poisson-short-tight:400:2"], ids=["teaching trace", "400 requests"]
)
def test_every_caption_gives_the_tables_figures(
    workload: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", *([workload] if workload else []), "--name", "r", "--out", str(tmp_path)]
    assert main(argv) == 0
    markdown = (tmp_path / "r" / "report.md").read_text()
    table = _table(markdown)
    said = 0
    for caption in _captions(markdown):
        for policy, count in re.findall(r"`(\w+)`: ([\d,]+) idle slot-iterations?\b", caption):
            assert count == table["idle_slot_iterations"][policy], (policy, caption)
            said += 1
        for policy in re.findall(r"`(\w+)` left no slot idle", caption):
            assert table["idle_slot_iterations"][policy] == "0", (policy, caption)
            said += 1
    assert said >= 2, "no caption names the idle slot-iterations of both policies"
    # The story's opening sentence, against the same table.
    story = re.search(
        r"static batching takes \*\*([\d,]+)\*\* iterations and continuous batching "
        r"\*\*([\d,]+)\*\*.*?Utilization ([\d.]+%) against ([\d.]+%); "
        r"P95 wait ([\d,]+) against ([\d,]+) iterations",
        markdown,
    )
    assert story is not None
    static, continuous = story.groups()[0::2], story.groups()[1::2]
    for policy, (iterations, utilization, p95) in (("static", static), ("continuous", continuous)):
        assert table["iterations"][policy] == iterations
        assert table["utilization"][policy] == utilization
        assert table["p95_wait"][policy] == p95
