"""The logs and lines the fast path (:mod:`.steady`) takes: its scope, and a line's operations.

The fast path takes in a line only if its operations are of the kinds and in the places it
reasons about: the schedule preempts requests of the batch first, each freeing its table, then
admits waiting requests and allocates fresh pages to the batch (and,
where the log declares prefix sharing, an admitted request's table may begin with pages taken by
reference), the step decodes and computes prompts, or chunks of them, each prompt's end with
its token (after a prefix hit, the rest of the prompt), and the update finishes requests and
frees their pages. Everything else (and a line whose phases are out of order, which the lowering
rejects as malformed, or that takes, gives back or counts a state slot) goes to the full path.
"""

from __future__ import annotations

from typing import Final

import msgspec

from kvsched.checks.eventlog.header import LogHeader
from kvsched.checks.eventlog.version2 import (
    Admit,
    Alloc,
    Cache,
    Compute,
    Decode,
    Finish,
    Free,
    IterationLine,
    Preempt,
    Share,
    Token,
)
from kvsched.checks.monitor.pages import PageLedger
from kvsched.reference.record import RequestRecord
from kvsched.spec.vocabulary import WAITING

# The kinds of operation, and the status admitted from, as compiled statics: a name imported from
# an interpreted module is looked up in this module's globals at each use, and sort_ops tests
# each operation of every line against several kinds.
_ALLOC: Final = Alloc
_SHARE: Final = Share
_DECODE: Final = Decode
_ADMIT: Final = Admit
_CACHE: Final = Cache
_COMPUTE: Final = Compute
_TOKEN: Final = Token
_FINISH: Final = Finish
_FREE: Final = Free
_PREEMPT: Final = Preempt
_WAITING: Final = WAITING


def in_scope(header: LogHeader) -> bool:
    """Whether the fast path applies to a log with this header: a log of version 2 that lists
    page ids and declares no state slots. Which of its lines it takes in, each check's
    predicates say (:class:`~kvsched.checks.monitor.registry.Steady`), whatever else the log
    declares. Every line of a log with state slots may take, give back or count a slot, and the
    slot holders live in the lowering (:mod:`.lowering`), so such a log goes the full path."""
    return header.version == 2 and header.pages == "ids" and header.properties.state_slots is None


class LineOps:
    """A line's operations by kind, for a line the fast path may take in."""

    def __init__(self) -> None:
        self.allocs: list[Alloc | Share] = []
        """Its allocations and shares, in order: how its tables grow."""
        self.admitted: dict[str, None] = {}
        """The requests admitted, in order."""
        self.grown: dict[str, int] = {}
        """The pages each request gained, fresh or shared."""
        self.gained: dict[str, tuple[int, ...]] = {}
        """Those pages, in order."""
        self.fresh: set[int] = set()
        """The fresh pages: in the pool, not reserved, none twice."""
        self.shared: dict[str, tuple[int, ...]] = {}
        """The pages each admitted request took by reference: in the pool, not reserved, not
        fresh, none twice in its table."""
        self.cached: dict[str, int] = {}
        """The tokens each request took from the prefix cache."""
        self.decode: msgspec.Raw | None = None
        """The decode list as the line gives it (raw JSON), or ``None``."""
        self.computes: dict[str, int] = {}
        """The tokens each request computed: its prompt, or a chunk of it."""
        self.tokens: dict[str, None] = {}
        """The requests of :attr:`computes` that produced a token, in order: the others
        computed a chunk short of the prompt's end."""
        self.finishes: dict[str, None] = {}
        self.frees: dict[str, tuple[int, ...]] = {}
        """The pages each finished request gave back."""
        self.preempted: dict[str, None] = {}
        """The requests of the batch preempted, in order, before anything else of the schedule."""
        self.released: dict[str, tuple[int, ...]] = {}
        """The pages each preempted request gave back in the schedule."""


def sort_ops(
    line: IterationLine,
    live: dict[str, RequestRecord],
    active: dict[str, None],
    pages: PageLedger,
) -> LineOps | None:
    """The operations of ``line`` sorted, if each is of a kind and in a place the fast path
    takes: pages of the pool for a request of the batch (whether another holds them is the
    caller's to say), pages taken by reference and cache hits at admission where the log
    declares prefix sharing, admissions of waiting requests, at most one decode list.
    ``live`` and ``active`` are dicts, not ``Mapping``s: compiled, each lookup is then a C call,
    not a method looked up on every operation."""
    if line.free_slots is not None:
        return None  # a slot count where none is declared: the lowering refuses the line
    ops = LineOps()
    allocs, admitted, grown, gained = ops.allocs, ops.admitted, ops.grown, ops.gained
    computes, tokens, finishes, frees, shared, cached = (
        ops.computes,
        ops.tokens,
        ops.finishes,
        ops.frees,
        ops.shared,
        ops.cached,
    )
    preempted, released = ops.preempted, ops.released
    given_all: list[int] = []
    shares_all: list[int] = []
    freed_all: list[int] = []
    phase = 0
    for op in line.ops:
        kind = type(op)
        if kind is _ALLOC:
            rid, given = op.request, op.pages  # type: ignore[union-attr]
            if phase or isinstance(given, int) or not (rid in active or rid in admitted):
                return None
            if rid in preempted:
                return None
            given_all += given
            grown[rid] = grown.get(rid, 0) + len(given)
            gained[rid] = gained.get(rid, ()) + given
            allocs.append(op)  # type: ignore[arg-type]
        elif kind is _SHARE:
            rid = op.request  # type: ignore[union-attr]
            hit: tuple[int, ...] = op.pages  # type: ignore[union-attr,assignment]
            # A hit comes at admission, before the request's fresh pages: its table begins.
            if phase or rid not in admitted or rid in grown or not pages.sharing:
                return None
            shares_all += hit
            grown[rid] = len(hit)
            gained[rid] = shared[rid] = hit
            allocs.append(op)  # type: ignore[arg-type]
        elif kind is _DECODE:
            if phase > 1 or ops.decode is not None:
                return None
            phase, ops.decode = 1, op.requests  # type: ignore[union-attr]
        elif kind is _ADMIT:
            rid = op.request  # type: ignore[union-attr]
            record = live.get(rid)
            if phase or record is None or record.status is not _WAITING or rid in admitted:
                return None
            admitted[rid] = None
        elif kind is _CACHE:
            rid, amount = op.request, op.tokens  # type: ignore[union-attr]
            if phase > 1 or rid not in shared or rid in cached or rid in computes or amount < 1:
                return None
            phase, cached[rid] = 1, amount
        elif kind is _COMPUTE:
            rid, amount = op.request, op.tokens  # type: ignore[union-attr]
            if phase > 1 or rid in computes or amount < 1:
                return None
            if not (rid in active or rid in admitted):
                return None
            phase, computes[rid] = 1, amount
        elif kind is _TOKEN:
            rid = op.request  # type: ignore[union-attr]
            if phase > 1 or rid in tokens or rid not in computes:
                return None
            phase = 1
            tokens[rid] = None
        elif kind is _FINISH:
            rid = op.request  # type: ignore[union-attr]
            if rid in finishes:
                return None
            phase, finishes[rid] = 2, None
        elif kind is _FREE:
            rid, given = op.request, op.pages  # type: ignore[union-attr]
            if isinstance(given, int):
                return None
            if not phase:  # the schedule's: a preempted request's table, given back at once
                if allocs or admitted or rid not in preempted or rid in released:
                    return None
                freed_all += given
                released[rid] = given
                continue
            if rid not in finishes:
                return None
            phase = 2
            freed_all += given
            frees[rid] = frees.get(rid, ()) + given
        elif kind is _PREEMPT:
            rid = op.request  # type: ignore[union-attr]
            # Before any admission or allocation: the schedule makes room, then uses it.
            if phase or allocs or admitted or rid not in active or rid in preempted:
                return None
            preempted[rid] = None
        else:
            return None
    if cached and not computes.keys() >= cached.keys():  # views made only for a cache hit
        return None
    # Every page allocated is in the pool, usable and allocated once; a page shared is in the
    # pool, usable, not also fresh, and in its taker's table once; a page freed is in the pool
    # (the fast path counts holders by page id, steady_pages.py).
    pool = pages.pool_pages
    for page in freed_all:
        if not 0 <= page < pool:
            return None
    fresh = ops.fresh = set(given_all)
    if given_all or shares_all:
        if len(fresh) != len(given_all):
            return None
        reserved = pages.reserved
        if not reserved.isdisjoint(fresh):
            return None
        for page in given_all:  # a line allocates a few: a compiled loop beats min and max
            if not 0 <= page < pool:
                return None
        if shares_all:
            for taken in shared.values():
                if len(set(taken)) != len(taken):
                    return None
            if not reserved.isdisjoint(shares_all) or not fresh.isdisjoint(shares_all):
                return None
            for page in shares_all:
                if not 0 <= page < pool:
                    return None
    return ops
