"""Progress as LIVE-3 measures it (spec/semantics.md, section 8): one rule for the run's bound
and the monitor.

Progress is every output token produced plus every token of KV a request computes beyond the
most it ever held. A request preempted a second time while progress, counted to the end of the
iteration of that second preemption, still stands where it stood at its first preemption is
thrash: the engine is cycling through states it has been in. The end of the iteration, not the
moment of preemption, because a preemption comes first in its iteration and may be what lets
the rest of the batch progress in it (a priority victim re-admitted while a decode waited): that
engine is not cycling. The monitor reports thrash as LIVE-3; the run's bound pays no recompute
for it, or a target that cycles forever would push the bound ahead of every iteration.
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
        self.before = 0
        """The count before the latest iteration counted: where a preemption in it stood."""

    def count(self, produced: int, computed: Iterable[str], kv: Mapping[str, int]) -> None:
        """``produced`` output tokens, and the KV (``kv``) of the requests that ``computed``."""
        self.before = self.value
        self.value += produced
        most, value = self.most, self.value
        for rid in computed:
            now, before = kv[rid], most.get(rid, 0)
            if now > before:
                value += now - before
                most[rid] = now
        self.value = value

    def forget(self, request_id: str) -> None:
        """``request_id`` finished: it is never preempted or computes again."""
        self.most.pop(request_id, None)
        self.stamp.pop(request_id, None)

    def preempted_again(self, request_id: str) -> bool:
        """Note ``request_id``'s preemption in the iteration just counted; whether it repeats
        one with no progress since, this iteration included."""
        before = self.stamp.get(request_id)
        self.stamp[request_id] = self.before
        return before == self.value
