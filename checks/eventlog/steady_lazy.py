"""The counts of the requests the fast path (:mod:`.steady`) counts lazily, when each is due, and
the rules that say a request's counts are steady.

A request that decodes in every line taken in gains one KV token and one output token per line.
Instead of counting them into the ledgers line by line, :class:`LazyCounts` notes the number of
lines taken in (the clock) that a request's counts are as of, and counts the steps in only when
the full path takes over (a request that finishes first leaves every ledger with them uncounted).
When a request must next be named is known in advance (its next page boundary, or its last
token); a line that names it notes the next time.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Meter
from kvsched.spec.workload import pages_for


class LazyCounts:
    """The requests decoding lazily, the clock each one's counts are as of, and their dues."""

    def __init__(
        self, monitor: Monitor, meter: Meter, tables: Mapping[str, tuple[int, ...]]
    ) -> None:
        requests = monitor.requests
        self.kv, self.generated = requests.kv, requests.generated
        self.most = monitor.liveness.progress.most
        self.meter_kv, self.meter_generated, self.meter_most = meter.kv, meter.generated, meter.most
        self.tables = tables
        """The live tables as the log built them (the reader's), kept by the fast path."""
        self.ledger = monitor.pages.tables
        self.page_size = monitor.limits.page_size
        # The ledger's own: they grow with the requests a log declares as they come.
        self.outputs, self.prompts = requests.outputs, requests.prompts
        self.lazy: dict[str, int] = {}
        """Requests decoding in every line taken in, with the clock their counts are as of."""
        self.due: dict[str, int] = {}
        """When each lazy request must next be named."""
        self.dues: dict[int, list[str]] = {}
        """The requests that fell due at each clock (some since named again, and moved on)."""

    def may_join(self, rid: str, told: Container[str]) -> bool:
        """Whether a request of the batch may start decoding lazily: its counts agree in every
        ledger (the page ledger's table, unless its table changed since the ledger was last
        ``told``, is the reader's), and each decode step adds one KV token beyond the most it
        held (LIVE-3, EFF-4)."""
        kv, generated = self.kv[rid], self.generated[rid]
        lag = self.prompts[rid] + generated - kv
        return (
            0 <= lag <= 1
            and self.most[rid] == kv
            and self.meter_kv[rid] == kv
            and self.meter_most[rid] == kv
            and self.meter_generated[rid] == generated
            and (rid in told or len(self.tables.get(rid, ())) == len(self.ledger.get(rid, ())))
        )

    def computes(self, rid: str, amount: int, grown: int, finishes: bool) -> bool:
        """A request computing ``amount`` tokens and producing one: DEC-3 (its KV reaches the
        end of what exists), DEC-1 (and no further), then as :meth:`steady_after`."""
        known = self.prompts[rid] + self.generated[rid]
        kv = self.kv[rid]
        if not known <= kv + amount <= known + 1 or self.meter_kv[rid] != kv:
            return False
        if self.meter_generated[rid] != self.generated[rid]:
            return False
        return self.steady_after(rid, amount, 1, grown, finishes)

    def steady_after(self, rid: str, kv: int, made: int, grown: int, finishes: bool) -> bool:
        """A request ``kv`` KV and ``made`` output tokens further on, ``grown`` pages more: its
        pages cover its KV minimally (PAGE-1) and it finishes exactly at its last token (REQ-2)."""
        held = len(self.tables.get(rid, ())) + grown
        if held != pages_for(self.kv[rid] + kv, self.page_size):
            return False
        return (self.generated[rid] + made == self.outputs[rid]) == finishes

    def bring(self, rid: str, clock: int) -> None:
        """Count ``rid``'s steady steps into every ledger, as of ``clock``."""
        steps = clock - self.lazy[rid]
        if steps:
            kv = self.kv
            kv[rid] += steps
            self.generated[rid] += steps
            self.most[rid] = kv[rid]
            meter_kv = self.meter_kv
            meter_kv[rid] += steps
            self.meter_generated[rid] += steps
            self.meter_most[rid] = meter_kv[rid]
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
        """``rid`` finished: every ledger forgets its counts, so they are not brought in."""
        self.lazy.pop(rid, None)
        self.due.pop(rid, None)

    def bring_all(self, clock: int) -> None:
        """Every count up to date as of ``clock``, and no request lazy any longer."""
        for rid in self.lazy:
            self.bring(rid, clock)
        self.lazy.clear()
        self.due.clear()
        self.dues.clear()
