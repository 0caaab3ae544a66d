"""Progress as LIVE-3 measures it (spec/semantics.md, section 8): one rule for the run's bound
and the monitor.

Progress is every output token produced plus every token of KV a request computes beyond the
most it ever held. A request preempted a second time while progress still stands where it stood
at its first preemption is thrash: the engine is cycling through states it has been in. The
monitor reports that as LIVE-3; the run's bound pays no recompute for it, or a target that
cycles forever would push the bound ahead of every iteration.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


class Progress:
    """The progress count, each request's most KV, and the count at its latest preemption."""

    def __init__(self) -> None:
        self.value = 0
        self.most: Counter[str] = Counter()
        self.stamp: dict[str, int] = {}

    def preempt(self, request_id: str) -> bool:
        """Note ``request_id``'s preemption; whether it repeats one with no progress between."""
        before = self.stamp.get(request_id)
        self.stamp[request_id] = self.value
        return before == self.value

    def count(self, produced: int, computed: Iterable[str], kv: Mapping[str, int]) -> None:
        """``produced`` output tokens, and the KV (``kv``) of the requests that ``computed``."""
        self.value += produced
        most = self.most
        for rid in computed:
            if kv[rid] > most[rid]:
                self.value += kv[rid] - most[rid]
                most[rid] = kv[rid]
