"""Write a report's blocks as report.md (tabulate pipe tables) and a self-contained report.html.

The HTML has no scripts, no fonts and nothing fetched from the network: one inline stylesheet,
tables, and the plots as ``<img>`` elements pointing at the PNG files beside it, so the folder
can be opened from disk, attached to a CI run or committed as it is.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tabulate import tabulate

from .figures import Plot


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str
    """Plain text; `backticks` mark code and **stars** mark emphasis, in both outputs."""


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    """Cells already formatted; columns of numbers are aligned right, others left."""


@dataclass(frozen=True)
class Image:
    plot: Plot


Block = Heading | Paragraph | Code | Bullets | Table | Image


def to_markdown(blocks: Sequence[Block]) -> str:
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {block.text}")
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Code):
            parts.append(f"```\n{block.text}\n```")
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table):
            parts.append(_table(block, "pipe"))
        else:
            parts.append(f"![{block.plot.title}]({block.plot.filename})\n\n*{block.plot.caption}*")
    return "\n\n".join(parts) + "\n"


_STYLE = """
body { font-family: sans-serif; max-width: 76rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
code, pre { font-family: monospace; background: #f4f4f4; }
pre { padding: 0.6rem 0.8rem; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; }
th { background: #f0f0f0; text-align: left; }
.num { text-align: right; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.92rem; color: #444; }
""".strip()


def to_html(blocks: Sequence[Block], title: str) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>\n{_STYLE}\n</style>",
        "</head>",
        "<body>",
    ]
    for block in blocks:
        if isinstance(block, Heading):
            parts.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
        elif isinstance(block, Bullets):
            items = "".join(f"<li>{_inline(item)}</li>" for item in block.items)
            parts.append(f"<ul>{items}</ul>")
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        else:
            plot = block.plot
            parts.append(
                f'<figure><img src="{html.escape(plot.filename)}" '
                f'alt="{html.escape(plot.title)}">'
                f"<figcaption>{_inline(plot.caption)}</figcaption></figure>"
            )
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


_NUMBER = re.compile(r"[+-]?([0-9][0-9.,]*(e[+-]?[0-9]+)?|inf)%?|n/a|")


def _numeric_columns(table: Table) -> list[bool]:
    """Columns whose every cell is a number (or blank) are aligned right, the rest left."""
    return [
        all(_NUMBER.fullmatch(row[column]) for row in table.rows) if table.rows else False
        for column in range(len(table.headers))
    ]


def _table(table: Table, fmt: str) -> str:
    aligns = ["right" if numeric else "left" for numeric in _numeric_columns(table)]
    # A '|' inside a cell would end the cell of a pipe table.
    rows = [[cell.replace("|", "\\|") for cell in row] for row in table.rows]
    return tabulate(
        rows, headers=list(table.headers), tablefmt=fmt, disable_numparse=True, colalign=aligns
    )


def _html_table(table: Table) -> str:
    numeric = _numeric_columns(table)

    def cell(tag: str, text: str, column: int) -> str:
        style = ' class="num"' if numeric[column] else ""
        return f"<{tag}{style}>{_inline(text)}</{tag}>"

    head = "".join(cell("th", text, column) for column, text in enumerate(table.headers))
    body = "".join(
        "<tr>" + "".join(cell("td", text, column) for column, text in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    """Escape, then turn `code` and **strong** into their HTML elements."""
    escaped = html.escape(text)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return _STRONG.sub(r"<strong>\1</strong>", escaped)
