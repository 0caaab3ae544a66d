"""The counts of the requests the fast path (:mod:`.steady`) counts lazily, and when each is due.

A request that decodes in every line taken in gains one KV token and one output token per line.
Instead of counting them into their records line by line, :class:`LazyCounts` notes the number of
lines taken in (the clock) that a request's counts are as of, and counts the steps in only when
the full path takes over (a request that finishes first leaves with them uncounted).
When a request must next be named is known in advance, from the checks' request predicates
(its next page boundary, or its last token); a line that names it notes the next time.
"""

from __future__ import annotations

from collections.abc import Container

from kvsched.checks.eventlog.steady_ops import LineOps
from kvsched.checks.monitor.registry import (
    FOREVER,
    RequestPredicate,
    iteration_plan,
)
from kvsched.checks.monitor.runtime import Monitor
from kvsched.checks.monitor.steady_request import SteadyRequest
from kvsched.reference.record import as_dict
from kvsched.spec.events import IterationEvent


class LazyCounts:
    """The requests decoding lazily, the clock each one's counts are as of, and their dues."""

    def __init__(self, monitor: Monitor, tables: dict[str, tuple[int, ...]]) -> None:
        self.records = monitor.requests.records
        """The one record of each request (the monitor's, which the meter reads too)."""
        self.tables = tables
        """The live tables as the log built them (the reader's), kept by the fast path. A
        dict, not a ``Mapping``: compiled, its ``get`` is a C call, not a method looked up."""
        self.page_size = monitor.limits.page_size
        self.predicates: tuple[RequestPredicate, ...] = tuple(
            check.steady.request
            for check in iteration_plan()
            if check.steady is not None and check.steady.request is not None
        )  # each check's say in whether a request a steady line names may go without it
        self.lazy: dict[str, int] = {}
        """Requests decoding in every line taken in, with the clock their counts are as of."""
        self.due: dict[str, int] = {}
        """When each lazy request must next be named."""
        self.dues: dict[int, list[str]] = {}
        """The requests that fell due at each clock (some since named again, and moved on)."""

    def may_join(self, rid: str, told: Container[str]) -> bool:
        """Whether a request of the batch may start decoding lazily: each decode step adds one
        KV token beyond the most it held (LIVE-3, EFF-4), and the page ledger's table, unless
        its table changed since the ledger was last ``told``, is the reader's. What the checks
        ask of it, their request predicates say (the line names it)."""
        return self.records.is_steady(rid) and (
            rid in told or len(self.tables.get(rid, ())) == len(self.records.live[rid].table)
        )

    def named(
        self,
        clock: int,
        grown: dict[str, int],
        finishes: dict[str, None],
        joiners: list[str],
        computes: dict[str, int],
        ops: LineOps,
    ) -> dict[str, int] | None:
        """The requests the line at ``clock`` names (it grows, finishes, starts decoding or
        computes its prompt or a chunk, past what it took from the cache), each shown steady
        after it by every check's request predicate; each lazy one that decodes on, with the
        clock it next falls due at: the first at which a check has work on it again. ``None``
        if a check has work on one now."""
        lazy, live, computing = self.lazy, self.records.live, self.predicates
        cached, tokens = ops.cached, ops.tokens
        tables, page_size = self.tables, self.page_size
        named: dict[str, int] = {}
        # Most lines name only the requests they give a page. The joiners as a comprehension,
        # not dict.fromkeys: compiled, that is a method looked up and called.
        names = (
            {**grown, **finishes, **{rid: None for rid in joiners}, **computes}
            if (finishes or joiners or computes)
            else grown
        )
        for rid in names:
            since = lazy.get(rid)
            record = live[rid]
            decodes = True
            if since is not None:  # its lazy steps and this line's
                kv = made = clock - since
            elif rid in computes:
                decodes = rid in tokens
                kv, made = computes[rid] + cached.get(rid, 0), int(decodes)
            else:  # a joiner: it decodes in this line, its counts current until the last
                kv = made = 1
            request = SteadyRequest(  # a fold restart moved tokens from its prompt to its output
                record.kv + kv,
                record.prompt_tokens - record.moved,
                record.generated + made,
                record.output_length(),
                len(tables.get(rid, ())) + grown.get(rid, 0),
                page_size,
                rid in finishes,
                decodes,
            )
            horizon = FOREVER
            for steady_for in computing:
                lines = steady_for(request)
                if lines < 0:
                    return None  # a check has work on it in this line: the full path runs it
                if lines < horizon:
                    horizon = lines
            if not request.finishes and rid not in computes:
                named[rid] = clock + horizon + 1
        return named

    def schedule(self, named: dict[str, int]) -> None:
        """Note when each request of ``named``, lazy and named in a line just taken in, next
        falls due: the line it needs a page more in, or the line of its last token. A request
        kept lazy across a declined line keeps its due (:meth:`carry`)."""
        due, dues = self.due, self.dues
        for rid, when in named.items():
            due[rid] = when
            falling = dues.get(when)
            if falling is None:
                dues[when] = [rid]
            else:
                falling.append(rid)

    def leave(self, rid: str, clock: int) -> None:
        """``rid`` leaves the batch unfinished (preempted): its lazy steps as of ``clock`` into
        its record, and it is lazy no more."""
        since = self.lazy.pop(rid, None)
        if since is not None and since != clock:
            self.records.steady_steps(rid, clock - since)
        self.due.pop(rid, None)

    def forget(self, rid: str) -> None:
        """``rid`` finished: its record is forgotten, so its lazy steps are not brought in."""
        self.lazy.pop(rid, None)
        self.due.pop(rid, None)

    def carry(self, event: IterationEvent, clock: int) -> None:
        """Keep lazy across ``event``, a line the full path judged clean at ``clock`` with every
        count brought in (:meth:`bring_in`), the requests it only decoded, one token each and
        with no page gained, given back or taken from the cache: the line took one step of
        each as a steady line would, so each stays lazy with its counts current as of
        ``clock``, and still falls due when it was to (the clock counts the line). One due by
        the next line, or touched otherwise, leaves the lazy set, to join again and be named.
        The set is kept, not emptied and rebuilt: most lazy requests only decode there."""
        lazy, due, dues = self.lazy, self.due, self.dues
        dues.pop(clock, None)  # the full path judged whoever fell due in the line
        if not lazy:
            return
        computed = event.computed
        if computed is None:
            self.clear()
            return
        amounts = as_dict(computed)
        records = self.records
        live = records.live
        touched = {op.request for op in event.schedule}
        touched.update(event.freed, event.finished, event.cached)
        # Who decoded exactly once. Most lines list each request once: the set is then made in
        # C. Else counted here: collections.Counter is pure Python, slow to call from this
        # compiled module once per declined line.
        decoded = event.decoded
        once = set(decoded)
        if len(once) != len(decoded):
            once = set()
            for rid in decoded:
                if rid in once:
                    touched.add(rid)  # more than one token: not a steady step, it joins again
                else:
                    once.add(rid)
        dropped: list[str] = []
        for rid in lazy:
            when = due.get(rid)
            if (
                when is None
                or when <= clock + 1
                or rid in touched
                or rid not in once
                or rid not in live
                or amounts.get(rid, 0) != 1
                or not records.is_steady(rid)
            ):
                dropped.append(rid)
            else:
                lazy[rid] = clock
        for rid in dropped:
            del lazy[rid]
            due.pop(rid, None)  # its entry in dues is passed over: no longer its due

    def bring_in(self, clock: int) -> None:
        """Every count up to date as of ``clock``; the requests stay lazy, with their dues."""
        records, lazy = self.records, self.lazy
        for rid, since in lazy.items():  # each clock read with its request, not looked up
            if since != clock:  # its steady steps since, into its record
                records.steady_steps(rid, clock - since)
            lazy[rid] = clock  # a value replaced: the dict's size, which iterating checks, holds

    def clear(self) -> None:
        """No request lazy any longer (their counts brought in)."""
        self.lazy.clear()
        self.due.clear()
        self.dues.clear()
