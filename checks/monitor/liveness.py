"""The monitor's liveness rules beyond the bound: a stranded queue (LIVE-2) and thrash (LIVE-3).

LIVE-2: an iteration in which nothing runs and nothing is computed, nobody was preempted, and
the request the declared order serves next fits the free pages (its prompt and output so far plus
one token, with the watermark to spare) and the token budget. Whatever a correct engine's
admission rule, an idle engine with a fitting request admits it: real engines that leave slots
idle by design (head-of-line blocking, first-only chunking, padded budgets, periodic prefill) do
so only while something runs. This is the "stranded with the pool free" bug, caught when it
happens instead of at the bound.

LIVE-3: a request preempted a second time with no progress anywhere since its first preemption,
the iteration of the second included: no output token produced and no request's KV beyond the
most it ever held. The engine is then cycling through states it has been in: thrash. It is
judged once the iteration's progress is counted (:mod:`kvsched.reference.record` says why).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.spec.events import IterationEvent
from kvsched.spec.text import plural
from kvsched.spec.workload import pages_for


class LivenessRules:
    """LIVE-2 and LIVE-3 over the request and page ledgers."""

    def __init__(self, requests: RequestLedger, pages: PageLedger, checks: set[str]) -> None:
        self.requests, self.pages = requests, pages
        self.stranded = "LIVE-2" in checks
        self.thrash = "LIVE-3" in checks
        self.counted = 0
        """The latest iteration whose progress was counted."""

    def count_progress(self, n: int, event: IterationEvent, computed: Mapping[str, int]) -> None:
        """After the token checks counted the iteration's KV and outputs into the records, and
        with them the progress."""
        self.counted = n
        if event.preempted and not any(computed.values()):
            # A request that preempts itself ends the schedule() (vLLM's break): the iteration
            # computed nothing, and the bound's other allowances assume every iteration does.
            self.requests.bound += 1
            self.requests.tally.allowance += 1

    def check_thrash(self, n: int, event: IterationEvent) -> Finding | None:
        """LIVE-3, for this iteration's preemptions, once its progress is counted."""
        if self.counted != n:  # the token checks failed: no count to judge by
            return None
        for rid in event.preempted:
            if not self.requests.records.preempted_again(rid):
                continue
            if not self.thrash:  # taken out by a declaration (applicability.declared_out)
                self.requests.tally.thrash += 1
                continue
            message = (
                f"request {rid!r} was preempted again in iteration {n}, and no request has "
                "produced a token or computed new KV since its last preemption, this "
                "iteration included: the engine cycles through the same states (thrash)"
            )
            return Finding("LIVE-3", n, message, requests=(rid,))
        return None

    def check_stranded(
        self, n: int, event: IterationEvent, head: str | None, computed: Mapping[str, int]
    ) -> Finding | None:
        """LIVE-2: nothing runs, nothing computed, and ``head`` fits the pool and the budget."""
        requests = self.requests
        if not self.stranded or head is None or requests.active or event.preempted:
            return None
        if any(computed.values()) or event.decoded:
            return None
        properties = requests.properties
        history = requests.live[head].known() + 1
        budget = properties.token_budget
        if budget is not None and properties.declared_chunking == "none" and budget < history:
            return None
        if properties.admission == "peak":
            needed = requests.reservation(head)
        else:
            needed = pages_for(history, requests.page_size)
        free = self.pages.room(n)  # less what an asynchronous target's fence holds
        room = free - properties.watermark_pages
        if needed > room:
            if needed <= free:  # it fitted but for the declared watermark
                requests.tally.watermarked(n)
            elif needed <= self.pages.free - properties.watermark_pages:  # but for the fence
                requests.tally.fenced(n)
            return None
        message = (
            f"nothing ran in iteration {n} while {head!r} waited at the head of the queue and "
            f"fitted: it needs {plural(needed, 'page')} and {free} were free"
        )
        return Finding("LIVE-2", n, message, requests=(head,))
