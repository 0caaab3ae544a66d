"""How a report writes a number, in tables, sentences, captions and plot labels alike.

One set of rules so that a figure reads the same wherever it appears: counts with thousands
separators (``2,000``), other values to a fixed two decimals (``19.60``), and fractions as
percentages to one decimal (``47.3%``). A row of values for one metric shares its decimals, so
``19`` beside ``19.6`` is written ``19.00`` and ``19.60``. Measured times and sizes (asv's
seconds and bytes) keep three significant digits instead: two decimals would round a millisecond
to zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DECIMALS = 2
PERCENT_DECIMALS = 1
FRACTION_UNIT = "fraction"
_SIGNIFICANT_UNITS = ("seconds", "bytes")


def count(value: float) -> str:
    """A whole number with thousands separators: ``2,000``."""
    return f"{round(value):,}"


def percent(fraction: float) -> str:
    """A fraction as a percentage: ``0.4734`` -> ``47.3%``."""
    return f"{fraction:.{PERCENT_DECIMALS}%}"


def fixed(value: float, decimals: int = DECIMALS) -> str:
    return f"{value:,.{decimals}f}"


def value(number: float, unit: str = "") -> str:
    """One value on its own, as :func:`values` would write it alone."""
    return values((number,), unit)[0]


def values(numbers: Sequence[float], unit: str = "") -> list[str]:
    """Values of one metric (a table row, the two sides of a comparison), sharing decimals."""
    if unit == FRACTION_UNIT:
        return [percent(n) for n in numbers]
    if any(not math.isfinite(n) for n in numbers):
        return [str(n) if not math.isfinite(n) else fixed(n) for n in numbers]
    if unit in _SIGNIFICANT_UNITS:
        return [f"{n:,.3g}" if abs(n) >= 1000 else f"{n:.3g}" for n in numbers]
    if all(float(n).is_integer() for n in numbers):
        return [count(n) for n in numbers]
    return [fixed(n) for n in numbers]


def signed(number: float, unit: str = "", like: Sequence[float] = ()) -> str:
    """A change with its sign (``+3``, ``-0.25``, ``+1.2 pp`` for fractions, ``0`` for none)."""
    if number == 0:
        return "0"
    if unit == FRACTION_UNIT:
        return f"{100 * number:+.{PERCENT_DECIMALS}f} pp"
    text = values((abs(number), *like), unit)[0]
    return ("+" if number > 0 else "-") + text


def signed_percent(number: float) -> str:
    """A relative change: ``+5.0%``, ``-12.3%``, ``0%``; ``new`` from a baseline of 0, where no
    ratio exists (an infinite one reads as a number it is not)."""
    if number == 0:
        return "0%"
    if math.isinf(number):
        return "new"
    return f"{number:+,.{PERCENT_DECIMALS}f}%"


def counted(n: int, noun: str, plural: str = "") -> str:
    """A count with its noun, separators included: ``1 breach``, ``2,000 requests``."""
    return f"{count(n)} {noun if n == 1 else (plural or noun + 's')}"
