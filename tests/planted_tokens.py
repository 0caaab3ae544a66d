"""Plantings of the tokens (tests/planted.py): one token fewer or one more, and a chunk longer
than its request's every token."""

from __future__ import annotations

import random
from typing import Any

from planted import Planted, computed_by, pick
from planted_ops import Line, Rows, walk


def _decoded(line: Line) -> list[tuple[str, list[Any], int, int]]:
    """Each token the line produces: its request, the list holding it and its place there, and
    (version 2) the index of its op."""
    if line.version == 1:
        return [(rid, line.row["decoded"], i, -1) for i, rid in enumerate(line.row["decoded"])]
    found = []
    for at, op in enumerate(line.ops):
        if op[0] == "decode":
            found += [(rid, op[1], j, at) for j, rid in enumerate(op[1])]
        elif op[0] == "token":
            found.append((op[1], line.ops, at, at))
    return found


LATE_TOKEN = (
    "one token fewer shows where the request's KV runs ahead of its output (DEC-1), or where it "
    "finishes short of its output length (REQ-2), or at the end of the run"
)


def drop_token(rows: Rows, rng: random.Random) -> Planted | None:
    """One output token removed: from ``decoded`` (version 1; ``computed`` kept), or a
    ``token`` op, or a request's entry of a ``decode`` op, which then computes its token
    without producing it (version 2)."""
    site = pick(rng, [(line, *token) for line in walk(rows) for token in _decoded(line)])
    if site is None:
        return None
    line, rid, holder, i, at = site
    del holder[i]
    if line.version == 2 and holder is not line.ops:  # it computed its token all the same
        line.ops.insert(at + 1, ["compute", rid, 1])
        if not holder:
            del line.ops[at]
    return Planted(line.iteration, f"a token of {rid} removed", LATE_TOKEN)


def double_token(rows: Rows, rng: random.Random) -> Planted | None:
    """One output token produced twice in one iteration."""
    site = pick(rng, [(line, *token) for line in walk(rows) for token in _decoded(line)])
    if site is None:
        return None
    line, rid, _, _, at = site
    if line.version == 1:
        line.row["decoded"].append(rid)
    else:
        line.ops.insert(at + 1, ["token", rid])
    return Planted(line.iteration, f"a second token of {rid}")


def long_chunk(rows: Rows, rng: random.Random) -> Planted | None:
    """A chunk short of the prompt's end (computed, no token) made longer than every token the
    request will ever have: its KV runs past what exists (DEC-1), or past its pages (PAGE-1),
    or the line past its token budget (BATCH-1)."""
    sizes = {
        r["id"]: r["prompt_tokens"] + r["output_tokens"] for r in rows[0]["workload"]["requests"]
    }
    sites = []
    for line in walk(rows):
        tokens = {rid for rid, *_ in _decoded(line)}
        sites += [(line, rid) for rid in computed_by(line) if rid not in tokens and rid in sizes]
    site = pick(rng, sites)
    if site is None:
        return None
    line, rid = site
    if line.version == 1:
        line.row["computed"][rid] += sizes[rid]
    else:
        for op in line.ops:
            if op[0] == "compute" and op[1] == rid:
                op[2] += sizes[rid]
    return Planted(line.iteration, f"{rid}'s chunk computes {sizes[rid]} tokens more")
