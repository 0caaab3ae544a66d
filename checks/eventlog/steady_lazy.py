"""The counts of the requests the fast path (:mod:`.steady`) counts lazily, and when each is due.

A request that decodes in every line taken in gains one KV token and one output token per line.
Instead of counting them into the ledgers line by line, :class:`LazyCounts` notes the number of
lines taken in (the clock) that a request's counts are as of, and counts the steps in only when
the request finishes or the full path takes over. When a request must next be named is known in
advance (its next page boundary, or its last token); a line that names it notes the next time.
"""

from __future__ import annotations

from kvsched.checks.monitor.runtime import Monitor
from kvsched.reference.efficiency import Meter


class LazyCounts:
    """The requests decoding lazily, the clock each one's counts are as of, and their dues."""

    def __init__(self, monitor: Monitor, meter: Meter) -> None:
        requests = monitor.requests
        self.kv, self.generated = requests.kv, requests.generated
        self.most = monitor.liveness.progress.most
        self.meter_kv, self.meter_generated, self.meter_most = meter.kv, meter.generated, meter.most
        self.tables = monitor.pages.tables
        self.page_size = monitor.limits.page_size
        self.outputs = {rid: r.output_tokens for rid, r in requests.requests.items()}
        self.lazy: dict[str, int] = {}
        """Requests decoding in every line taken in, with the clock their counts are as of."""
        self.due: dict[str, int] = {}
        """When each lazy request must next be named."""
        self.dues: dict[int, list[str]] = {}
        """The requests that fell due at each clock (some since named again, and moved on)."""

    def named(self, clock: int) -> list[str]:
        """The requests a line at ``clock`` must name."""
        due = self.due
        return [rid for rid in self.dues.get(clock, ()) if due.get(rid) == clock]

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

    def schedule(self, rid: str, clock: int) -> None:
        """Note when ``rid``, its counts unchanged since it was named at ``clock``, next falls
        due: the line it needs a page more in, or the line of its last token."""
        steps = clock - self.lazy[rid]
        kv = self.kv[rid] + steps
        boundary = len(self.tables.get(rid, ())) * self.page_size - kv + 1
        due = clock + min(boundary, self.outputs[rid] - self.generated[rid] - steps)
        self.due[rid] = due
        if due in self.dues:
            self.dues[due].append(rid)
        else:
            self.dues[due] = [rid]

    def forget(self, rid: str) -> None:
        """``rid`` finished, its counts brought in."""
        self.lazy.pop(rid, None)
        self.due.pop(rid, None)

    def bring_all(self, clock: int) -> None:
        """Every count up to date as of ``clock``, and no request lazy any longer."""
        for rid in self.lazy:
            self.bring(rid, clock)
        self.lazy.clear()
        self.due.clear()
        self.dues.clear()
