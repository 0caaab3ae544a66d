"""How a percentile of waits is taken: numpy's method names, a closed vocabulary (section 7.4).

Percentiles of few values differ by convention: the P95 of 9 waits is ``0.4 x second-largest +
0.6 x largest`` under ``linear`` (Hyndman and Fan's type 7, numpy's default and what vLLM's and
SGLang's serving benchmarks report), the second-largest under ``lower`` (``sorted[floor((n - 1) *
0.95)]``, a common hand-written percentile), the largest under ``higher``. A workload file may
declare the convention its figures were published under (field ``percentile_method``);
``linear`` is the default. The names and their meaning are numpy's (``numpy.percentile``'s
``method`` argument), so anyone can reproduce a figure with one call.
"""

from __future__ import annotations

from typing import Literal, get_args

PercentileMethod = Literal[
    "linear",
    "lower",
    "higher",
    "nearest",
    "midpoint",
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "median_unbiased",
    "normal_unbiased",
]

PERCENTILE_METHODS: tuple[PercentileMethod, ...] = get_args(PercentileMethod)
DEFAULT_PERCENTILE_METHOD: PercentileMethod = "linear"


def percentile_method(name: object, where: str) -> PercentileMethod:
    """``name`` as a method, or a ``ValueError`` naming ``where`` and every known method."""
    for method in PERCENTILE_METHODS:
        if name == method:
            return method
    raise ValueError(
        f"{where}: unknown percentile method {name!r}; use one of numpy's: "
        + ", ".join(PERCENTILE_METHODS)
        + f" (default {DEFAULT_PERCENTILE_METHOD})"
    )
