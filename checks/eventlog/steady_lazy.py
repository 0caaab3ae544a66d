"""The counts of the requests the fast path (:mod:`.steady`) counts lazily, when each is due, and
the rules that say a request's counts are steady.

A request that decodes in every line taken in gains one KV token and one output token per line.
Instead of counting them into their records line by line, :class:`LazyCounts` notes the number of
lines taken in (the clock) that a request's counts are as of, and counts the steps in only when
the full path takes over (a request that finishes first leaves with them uncounted).
When a request must next be named is known in advance (its next page boundary, or its last
token); a line that names it notes the next time.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from kvsched.checks.monitor.runtime import Monitor
from kvsched.spec.workload import pages_for


class LazyCounts:
    """The requests decoding lazily, the clock each one's counts are as of, and their dues."""

    def __init__(self, monitor: Monitor, tables: Mapping[str, tuple[int, ...]]) -> None:
        self.records = monitor.requests.records
        """The one record of each request (the monitor's, which the meter reads too)."""
        self.live = self.records.live
        self.tables = tables
        """The live tables as the log built them (the reader's), kept by the fast path."""
        self.ledger = monitor.pages.tables
        self.page_size = monitor.limits.page_size
        self.lazy: dict[str, int] = {}
        """Requests decoding in every line taken in, with the clock their counts are as of."""
        self.due: dict[str, int] = {}
        """When each lazy request must next be named."""
        self.dues: dict[int, list[str]] = {}
        """The requests that fell due at each clock (some since named again, and moved on)."""

    def may_join(self, rid: str, told: Container[str]) -> bool:
        """Whether a request of the batch may start decoding lazily: its KV is its prompt and
        output so far, or one token short, each decode step adds one KV token beyond the most
        it held (LIVE-3, EFF-4), and the page ledger's table, unless its table changed since
        the ledger was last ``told``, is the reader's."""
        record = self.live[rid]
        lag = record.request.prompt_tokens + record.generated - record.kv
        return (
            0 <= lag <= 1
            and self.records.is_steady(rid)
            and (rid in told or len(self.tables.get(rid, ())) == len(self.ledger.get(rid, ())))
        )

    def computes(self, rid: str, amount: int, grown: int, finishes: bool) -> bool:
        """A request computing ``amount`` tokens and producing one: DEC-3 (its KV reaches the
        end of what exists), DEC-1 (and no further), then as :meth:`steady_after`."""
        record = self.live[rid]
        known = record.request.prompt_tokens + record.generated
        if not known <= record.kv + amount <= known + 1:
            return False
        return self.steady_after(rid, amount, 1, grown, finishes)

    def steady_after(self, rid: str, kv: int, made: int, grown: int, finishes: bool) -> bool:
        """A request ``kv`` KV and ``made`` output tokens further on, ``grown`` pages more: its
        pages cover its KV minimally (PAGE-1) and it finishes exactly at its last token (REQ-2)."""
        record = self.live[rid]
        held = len(self.tables.get(rid, ())) + grown
        if held != pages_for(record.kv + kv, self.page_size):
            return False
        return (record.generated + made == record.request.output_tokens) == finishes

    def bring(self, rid: str, clock: int) -> None:
        """Count ``rid``'s steady steps into its record, as of ``clock``."""
        steps = clock - self.lazy[rid]
        if steps:
            self.records.steady_steps(rid, steps)
        self.lazy[rid] = clock

    def schedule(self, named: dict[str, int]) -> None:
        """Note when each request of ``named``, lazy and named in a line just taken in, next
        falls due: the line it needs a page more in, or the line of its last token."""
        due, dues = self.due, self.dues
        for rid, when in named.items():
            due[rid] = when
            falling = dues.get(when)
            if falling is None:
                dues[when] = [rid]
            else:
                falling.append(rid)

    def forget(self, rid: str) -> None:
        """``rid`` finished: its record is forgotten, so its lazy steps are not brought in."""
        self.lazy.pop(rid, None)
        self.due.pop(rid, None)

    def bring_all(self, clock: int) -> None:
        """Every count up to date as of ``clock``, and no request lazy any longer."""
        for rid in self.lazy:
            self.bring(rid, clock)
        self.lazy.clear()
        self.due.clear()
        self.dues.clear()
