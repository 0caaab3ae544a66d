"""Plain-text tables that fit a terminal: at most :data:`WIDTH` columns, folding where they must.

Every command's table (``sweep``, ``mutants``, ``replay``) is drawn here, in tabulate's
``simple`` format, so they read alike and none runs off a 100-column terminal. A table that fits
is drawn as tabulate draws it. A wider one folds: the widest column gives up a character at a
time, its cells and header wrapping onto more lines at spaces and after hyphens, until the table
fits. Folding never drops or splits a word or a figure (a table of words too long to fold stays
wider). The width is fixed, not the terminal's, so that piped output is the same on every
machine.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from tabulate import tabulate

WIDTH = 100
"""The widest a table may be, in characters: a common terminal's width."""

_NARROWEST = 4
"""No column is folded narrower than this; a table that still does not fit is left wider."""


def text_table(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    colalign: Sequence[str] | None = None,
    width: int = WIDTH,
) -> str:
    """``rows`` under ``headers`` as a ``simple`` table, at most ``width`` characters wide."""
    natural = [
        max(_longest_line(text) for text in (header, *(row[column] for row in rows)))
        for column, header in enumerate(headers)
    ]
    widths = list(natural)
    while True:
        # Folded here, not by tabulate's maxcolwidths: tabulate 0.10 casts a folded cell that
        # looks like a number with separators ("1,663.20") to float, and fails.
        table = tabulate(
            [[_folded(cell, w) for cell, w in zip(row, widths, strict=True)] for row in rows],
            headers=[_folded(header, w) for header, w in zip(headers, widths, strict=True)],
            tablefmt="simple",
            disable_numparse=True,
            colalign=colalign,
        )
        if _longest_line(table) <= width:
            return table
        widest = max(range(len(widths)), key=widths.__getitem__)
        if widths[widest] <= _NARROWEST:
            return table
        widths[widest] -= 1


def _folded(text: str, width: int) -> str:
    """``text`` wrapped to ``width``, line by line, whole words only; as it is when it fits."""
    if _longest_line(text) <= width:
        return text
    return "\n".join(
        folded
        for line in text.splitlines()
        for folded in textwrap.wrap(line, width, break_long_words=False) or [""]
    )


def _longest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)
