"""Write a report's blocks as report.md (tabulate pipe tables) and a self-contained report.html.

The HTML has no scripts, no fonts and nothing fetched from the network: one inline stylesheet,
tables, and the plots embedded as PNG data URIs (saved at twice their displayed size), so
report.html alone, kept as a CI artifact without the files beside it, still shows every plot.
report.md links the PNG files, which is what a Markdown viewer can show.

Both are :func:`~kvsched.spec.text.escaped` whole: a policy's failure quoted in a table is its
own text, and neither ``cat report.md`` nor a browser may take it as a terminal's command.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tabulate import tabulate

from kvsched.spec.text import escaped
from kvsched.spec.vocabulary import GateOutcome

from .figures import SAVE_SCALE, Plot


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    anchor: str = ""
    """An id a contents list links to (``#anchor``); empty for none."""


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


@dataclass(frozen=True)
class Folded:
    """A table shown folded away (``<details>``) under a one-line summary."""

    summary: str
    table: Table


@dataclass(frozen=True)
class Banner:
    """The verdict, coloured by its outcome, first on the page."""

    outcome: GateOutcome
    headline: str
    table: Table | None = None
    """What breached, if anything."""
    facts: tuple[str, ...] = ()
    """Where the figures come from: baseline, candidate, version, commit, time."""


Block = Heading | Paragraph | Code | Bullets | Table | Image | Folded | Banner


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
        elif isinstance(block, Folded):
            parts.append(
                f"<details><summary>{html.escape(block.summary)}</summary>\n\n"
                f"{_table(block.table, 'pipe')}\n\n</details>"
            )
        elif isinstance(block, Banner):
            lines = [f"> **{block.headline}**"]
            if block.table is not None:
                lines += [">", *(f"> {line}" for line in _table(block.table, "pipe").splitlines())]
            lines += [">", *(f"> - {fact}" for fact in block.facts)]
            parts.append("\n".join(lines))
        else:
            parts.append(f"![{block.plot.title}]({block.plot.filename})\n\n*{block.plot.caption}*")
    return escaped("\n\n".join(parts)) + "\n"


_STYLE = """
body { font-family: sans-serif; max-width: 76rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
code, pre { font-family: monospace; background: #f4f4f4; }
pre { padding: 0.6rem 0.8rem; white-space: pre-wrap; overflow-wrap: anywhere; }
.banner { border-radius: 6px; padding: 0.7rem 1rem; margin: 0 0 1rem 0; border: 2px solid; }
.banner h1 { margin: 0 0 0.4rem 0; font-size: 1.6rem; }
.banner ul { margin: 0.4rem 0 0 0; padding-left: 1.2rem; font-size: 0.92rem; }
.banner table { background: #fff; }
.passed { background: #e6f4ea; border-color: #1e8e3e; } .passed h1 { color: #137333; }
.failed { background: #fce8e6; border-color: #d93025; } .failed h1 { color: #a50e0e; }
.incomplete { background: #fef7e0; border-color: #f29900; } .incomplete h1 { color: #8a4b00; }
.not-gated { background: #f1f3f4; border-color: #9aa0a6; } .not-gated h1 { color: #3c4043; }
details { margin: 0.8rem 0; } summary { cursor: pointer; }
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
            anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
            parts.append(f"<h{block.level}{anchor}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            parts.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Folded):
            parts.append(
                f"<details><summary>{_inline(block.summary)}</summary>"
                f"{_html_table(block.table)}</details>"
            )
        elif isinstance(block, Banner):
            parts.append(_html_banner(block))
        elif isinstance(block, Code):
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
        elif isinstance(block, Bullets):
            items = "".join(f"<li>{_inline(item)}</li>" for item in block.items)
            parts.append(f"<ul>{items}</ul>")
        elif isinstance(block, Table):
            parts.append(_html_table(block))
        else:
            parts.append(_html_figure(block.plot))
    parts += ["</body>", "</html>"]
    return escaped("\n".join(parts)) + "\n"


def _html_banner(banner: Banner) -> str:
    css = banner.outcome.replace(" ", "-")
    parts = [
        f'<section class="banner {css}" id="verdict" role="status">',
        f"<h1>{_inline(banner.headline)}</h1>",
    ]
    if banner.table is not None:
        parts.append(_html_table(banner.table))
    if banner.facts:
        parts.append("<ul>" + "".join(f"<li>{_inline(f)}</li>" for f in banner.facts) + "</ul>")
    return "".join(parts) + "</section>"


def _html_figure(plot: Plot) -> str:
    width, height = png_size(plot.png)
    data = base64.b64encode(plot.png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" '
        f'width="{width // SAVE_SCALE}" height="{height // SAVE_SCALE}" '
        f'alt="{html.escape(plot.title)}">'
        f"<figcaption>{_inline(plot.caption)}</figcaption></figure>"
    )


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height in pixels, from the PNG's header chunk."""
    if len(png) < 24 or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


_NUMBER = re.compile(r"(\*\*)?[+-]?([0-9][0-9.,]*(e[+-]?[0-9]+)?|inf)( ?%| pp)?(\*\*)?|n/a|-|")


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
_LINK = re.compile(r"\[([^\]]+)\]\((#[A-Za-z0-9_.-]+)\)")


def _inline(text: str) -> str:
    """Escape, then turn `code`, **strong** and [links](#anchor) into their HTML elements."""
    escaped = html.escape(text)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    escaped = _LINK.sub(r'<a href="\2">\1</a>', escaped)
    return _STRONG.sub(r"<strong>\1</strong>", escaped)
