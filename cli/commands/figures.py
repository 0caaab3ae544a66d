"""``kvsched replay --format json``: the policies' metrics, written as they are read.

The text is ``json.dumps({policy: metrics.as_dict()}, indent=2)`` to the byte, but the waits (a
line per request) are written in slices as they come, never held as one dict or one string:
a million requests' waits would take some 200 MB as a dict of ints and as much again as text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import islice

from kvsched.commands.output import printing
from kvsched.reference.columns import Waits
from kvsched.reference.metrics import RunMetrics

SLICE = 8192
"""Waits written in one call: large enough that the writes cost nothing, small enough that the
text of one slice is a few hundred kilobytes."""
_WAITS = '"waits": {}'
_INDENT = "\n      "  # json.dumps's at depth three, with indent=2


def write_json(metrics: Mapping[str, RunMetrics]) -> None:
    """Print every policy's metrics as JSON, a newline after, all of it or OutputFailure."""
    text = json.dumps({p: replace(m, waits={}).as_dict() for p, m in metrics.items()}, indent=2)
    pieces = text.split(_WAITS)
    assert len(pieces) == len(metrics) + 1, "a figure's text holds the waits' own"
    with printing():
        write = sys.stdout.write
        for piece, figures in zip(pieces, metrics.values(), strict=False):
            write(piece)
            for chunk in waits_text(figures.waits):
                write(chunk)
        write(pieces[-1] + "\n")


def waits_text(waits: Mapping[str, int]) -> Iterator[str]:
    """The ``"waits"`` member as json.dumps writes it at that depth, slice by slice."""
    if not waits:
        yield _WAITS
        return
    pairs: Iterable[tuple[str, int]] = waits.pairs() if isinstance(waits, Waits) else waits.items()
    iterator = iter(pairs)
    separator = '"waits": {'
    while chunk := list(islice(iterator, SLICE)):
        yield separator + ",".join(f"{_INDENT}{json.dumps(k)}: {v}" for k, v in chunk)
        separator = ","
    yield "\n    }"
