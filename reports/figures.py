"""How every plot of a report is drawn and saved: colours, style and byte-stable PNG files.

Each plot module builds a :class:`matplotlib.figure.Figure` directly, without pyplot, so no
global figure state or interactive backend is involved, and saves it with :func:`save_png`.
The default style is applied explicitly, so a user's matplotlibrc cannot change a committed
report, and the PNG metadata omits the software version, so regenerating a report with the same
matplotlib gives the same bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvsched.checks.verdict.files import write_file

POLICY_COLOURS = {"static": "#d95f02", "continuous": "#1b9e77"}
_OTHER_COLOURS = ("#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
WAITING_COLOUR = "#c8c8c8"
IDLE_COLOUR = "#e31a1c"
DPI = 100
"""Layout resolution: font sizes and figure sizes are in inches at this many pixels each."""
SAVE_SCALE = 2
"""PNGs are saved at twice the layout resolution and shown at half their pixel size, so they stay
sharp on high-density screens."""


@dataclass(frozen=True)
class Plot:
    """A saved PNG and the words that go with it in the report."""

    filename: str
    title: str
    caption: str
    png: bytes = b""
    """The file's bytes, which report.html embeds so that it stands alone."""


def policy_colour(policy: str, order: int) -> str:
    return POLICY_COLOURS.get(policy, _OTHER_COLOURS[order % len(_OTHER_COLOURS)])


def slug(name: str) -> str:
    """A workload name made safe as part of a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "workload"


@contextmanager
def report_style() -> Iterator[None]:
    """matplotlib's default style plus a few report settings, whatever the user's rcParams."""
    import matplotlib.style

    with matplotlib.style.context("default"):
        matplotlib.rcParams.update(
            {
                "font.size": 11,
                "axes.titlesize": 12,
                "axes.spines.top": False,
                "axes.spines.right": False,
                "figure.dpi": DPI,
                "savefig.dpi": DPI,
                "path.simplify": True,
            }
        )
        yield


def new_figure(width: float, height: float) -> Any:
    """A pyplot-free figure (the Agg canvas is attached when it is saved)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_png(figure: Any, path: Path) -> bytes:
    """Write the PNG, whole or not at all, and return its bytes."""
    drawn = io.BytesIO()
    # Software would embed the matplotlib version; nothing else time-dependent is written to PNG.
    figure.savefig(drawn, format="png", dpi=DPI * SAVE_SCALE, metadata={"Software": None})
    write_file(path, drawn.getvalue())
    return drawn.getvalue()
