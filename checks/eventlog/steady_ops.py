"""The logs and lines the fast path (:mod:`.steady`) takes: its scope, and a line's operations.

The fast path takes in a line only if its operations are of the kinds and in the places it
reasons about: the schedule admits waiting requests and allocates fresh pages to the batch, the
step decodes and computes whole prompts with their tokens, and the update finishes requests and
frees their pages. Everything else (and a line whose phases are out of order, which the lowering
rejects as malformed) goes to the full path.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.version2 import (
    Admit,
    Alloc,
    Compute,
    Decode,
    Finish,
    Free,
    IterationLine,
    Token,
)
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.registry import iteration_plan
from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.record import RequestRecord
from kvsched.spec.vocabulary import WAITING


def in_scope(header: LogHeader, monitor: Monitor) -> bool:
    """Whether the fast path applies to a log with this header, checked by this monitor: a log
    of version 2 that lists page ids, whose lines every check lets a steady line skip it in
    (each check's :class:`~kvsched.checks.monitor.registry.Steady`)."""
    if header.version != 2 or header.pages != "ids":
        return False
    plan = iteration_plan()
    return all(check.steady is not None and check.steady.log(monitor) for check in plan)


SortedOps = tuple[
    list[Alloc],
    dict[str, None],
    dict[str, int],
    set[int],
    "msgspec.Raw | None",
    dict[str, int],
    dict[str, None],
    dict[str, tuple[int, ...]],
]
"""A line's operations by kind, for a line the fast path may take in: its allocations, the
requests admitted, the
pages each request gained, the fresh pages (in the pool, not reserved, none twice), the decode
list as the line gives it (raw JSON, or ``None``), the tokens each request computed, the
requests finished and the pages each gave back."""


def sort_ops(
    line: IterationLine,
    live: Mapping[str, RequestRecord],
    active: Mapping[str, None],
    pages: PageLedger,
) -> SortedOps | None:
    """The operations of ``line`` sorted, if each is of a kind and in a place the fast path
    takes: pages of the pool for a request of the batch (whether another holds them is the
    caller's to say), admissions of waiting requests, at most one decode list."""
    allocs: list[Alloc] = []
    admitted: dict[str, None] = {}
    grown: dict[str, int] = {}
    given_all: list[int] = []
    decode: msgspec.Raw | None = None
    computes: dict[str, int] = {}
    tokens: set[str] = set()
    finishes: dict[str, None] = {}
    frees: dict[str, tuple[int, ...]] = {}
    phase = 0
    for op in line.ops:
        kind = type(op)
        if kind is Alloc:
            rid, given = op.request, op.pages  # type: ignore[union-attr]
            if phase or isinstance(given, int) or not (rid in active or rid in admitted):
                return None
            given_all += given
            grown[rid] = grown.get(rid, 0) + len(given)
            allocs.append(op)  # type: ignore[arg-type]
        elif kind is Decode:
            if phase > 1 or decode is not None:
                return None
            phase, decode = 1, op.requests  # type: ignore[union-attr]
        elif kind is Admit:
            rid = op.request  # type: ignore[union-attr]
            record = live.get(rid)
            if phase or record is None or record.status != WAITING or rid in admitted:
                return None
            admitted[rid] = None
        elif kind is Compute:
            rid, amount = op.request, op.tokens  # type: ignore[union-attr]
            if phase > 1 or rid in computes or amount < 1:
                return None
            if not (rid in active or rid in admitted):
                return None
            phase, computes[rid] = 1, amount
        elif kind is Token:
            rid = op.request  # type: ignore[union-attr]
            if phase > 1 or rid in tokens or rid not in computes:
                return None
            phase = 1
            tokens.add(rid)
        elif kind is Finish:
            rid = op.request  # type: ignore[union-attr]
            if rid in finishes:
                return None
            phase, finishes[rid] = 2, None
        elif kind is Free:
            rid, given = op.request, op.pages  # type: ignore[union-attr]
            if not phase or isinstance(given, int) or rid not in finishes:
                return None
            phase = 2
            frees[rid] = frees.get(rid, ()) + given
        else:
            return None
    if len(tokens) != len(computes):
        return None
    # Every page allocated is in the pool, usable and allocated once.
    fresh = set(given_all)
    if given_all:
        if len(fresh) != len(given_all) or not pages.reserved.isdisjoint(fresh):
            return None
        pool = pages.pool_pages
        for page in given_all:  # a line allocates a few: a compiled loop beats min and max
            if not 0 <= page < pool:
                return None
    return allocs, admitted, grown, fresh, decode, computes, finishes, frees
