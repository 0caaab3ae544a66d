"""The monitor's batch rules: the batch's limits and work conservation (3.2; eventlog.md 4.6).

REQ-2 holds the batch an event reports to the requests admitted and not yet gone; BATCH-1 bounds the
batch by its slots and, when declared, the tokens it computes per iteration; PAGE-5 bounds what peak
admission commits; BATCH-3 flags a free slot while the head of the queue fits; BATCH-6 a request of
the batch left out while the budget had room. Each rule reads the ledgers' counters, so it costs
the same whatever the pool or queue size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kvsched.checks.monitor.findings import Finding, request_list
from kvsched.checks.monitor.pages import PageLedger
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.reference.record import as_dict
from kvsched.spec.events import IterationEvent
from kvsched.spec.text import plural
from kvsched.spec.workload import Limits, pages_for


class BatchRules:
    """The batch-level checks, over the request and page ledgers."""

    def __init__(
        self, requests: RequestLedger, pages: PageLedger, limits: Limits, applicable: set[str]
    ) -> None:
        self.requests, self.pages, self.limits = requests, pages, limits
        self.applicable = applicable
        self.properties = requests.properties

    def check_members(self, n: int, reported: Sequence[str]) -> Finding | None:
        """The event's batch must be the admitted requests not yet finished nor preempted."""
        listed = set(reported)
        if len(listed) != len(reported):
            twice = sorted({rid for rid in reported if reported.count(rid) > 1})
            return Finding(
                "REQ-2",
                n,
                f"{request_list(twice)} listed twice in the batch of iteration {n}: a request "
                "holds one place in the batch",
                requests=tuple(twice),
            )
        active = self.requests.active
        if len(listed) == len(active) and active.keys() == listed:
            return None  # as most events report it: compared in C, no list of who differs made
        extra = [rid for rid in reported if rid not in active]
        missing = [rid for rid in active if rid not in listed]
        if extra:
            return Finding(
                "REQ-2",
                n,
                f"{request_list(extra)} reported in the batch of iteration {n} "
                "without being admitted (or after finishing or being preempted)",
                requests=tuple(extra),
            )
        if missing:
            return Finding(
                "REQ-2",
                n,
                f"{request_list(missing)} left the batch in iteration {n} "
                "without finishing or being preempted: lost",
                requests=tuple(missing),
            )
        return None

    def check_slots(self, n: int) -> Finding | None:
        """BATCH-1 on slots: no more active requests than the batch limit."""
        batch = self.requests.active
        if len(batch) > self.limits.batch_limit:
            return Finding(
                "BATCH-1",
                n,
                f"{len(batch)} requests are active in iteration {n}, "
                f"over the batch limit of {self.limits.batch_limit}",
                requests=tuple(batch),
            )
        return None

    def check_commitment(self, n: int) -> Finding | None:
        """PAGE-5 on the pages peak admission commits (3.2)."""
        committed, usable = self.requests.committed, self.pages.usable
        if committed > usable and self.properties.admission == "peak":
            return Finding(
                "PAGE-5",
                n,
                f"the batch of iteration {n} commits {committed} pages "
                f"at its peak, more than the {usable} the pool has: someone will run "
                "out of pages",
                requests=tuple(self.requests.active),
            )
        return None

    def check_budget(self, n: int, computed: Mapping[str, int]) -> Finding | None:
        """BATCH-1 on tokens: an iteration computes at most the declared token budget."""
        budget = self.properties.token_budget
        total = sum(computed.values())
        if budget is not None and total > budget:
            return Finding(
                "BATCH-1",
                n,
                f"iteration {n} computed {total} tokens, over the token budget of {budget}",
                requests=tuple(computed),
            )
        return None

    def check_served(
        self, n: int, event: IterationEvent, computed: Mapping[str, int]
    ) -> Finding | None:
        """BATCH-6 (declared ``serves_running``): every request that was in the batch before
        iteration ``n`` and is still in it computes, unless those before it spent the budget,
        or it is in its prefill and the declared cap on prefills (``max_partial_prefills``) was
        reached by the batch's own prefills, as the records show them."""
        if "BATCH-6" not in self.applicable:
            return None
        amounts = as_dict(computed)
        admitted, finished = set(event.admitted), set(event.finished)
        ran = [rid for rid in event.active if rid not in admitted]
        skipped = [rid for rid in ran if not amounts.get(rid) and rid not in finished]
        if not skipped:
            return None
        budget = self.properties.token_budget
        spent = sum(computed.get(rid, 0) for rid in ran)
        if budget is not None and spent >= budget:
            return None
        cap = self.properties.max_partial_prefills
        why = ""
        if cap is not None:
            # Admissions come after the batch (serves_running): only the batch's own prefills
            # can have filled the cap by the time a request of the batch was passed over.
            held = self.prefills(event, computed, ran)
            waiting = [rid for rid in skipped if self.in_prefill(rid)]
            if held >= cap and waiting:
                skipped = [rid for rid in skipped if rid not in waiting]
                if not skipped:
                    self.requests.tally.capped(n)
                    return None
            declared = f"the declared cap of {plural(cap, 'partial prefill')}"
            if held < cap:
                why = (
                    f"; the batch computed {plural(held, 'prefill chunk')}, below {declared} "
                    "(max_partial_prefills)"
                )
            else:
                why = (
                    f"; {declared} (max_partial_prefills) excuses only a request in its "
                    "prefill, not a decode"
                )
        room = (
            "no token budget bounds the iteration"
            if budget is None
            else f"the batch left {budget - spent} of the {budget}-token budget"
        )
        message = (
            f"{request_list(skipped)} of the batch computed nothing in iteration {n}, while "
            f"{room}; the target declares that it serves the batch first (serves_running), each "
            f"request as far as the budget reaches, so one left out was skipped{why}"
        )
        return Finding("BATCH-6", n, message, requests=tuple(skipped))

    def in_prefill(self, rid: str) -> bool:
        """Whether ``rid`` has produced no token since it was last admitted, as the records
        stand: it is still computing its prompt, or its recompute (vLLM's
        ``is_prefill_chunk``). Read before its tokens of the iteration are counted in, or for a
        request that produced none in it."""
        record = self.requests.records.get(rid)
        return record is not None and record.generated == record.admitted_with

    def prefills(
        self, event: IterationEvent, computed: Mapping[str, int], among: Iterable[str]
    ) -> int:
        """How many of ``among`` computed a prefill chunk in the iteration of ``event``: KV
        computed before their first token since they were last admitted, the iteration's
        token (if any) taken back out of the records, which have counted it in. Under priority
        order the iteration's preemptions count too: the victim can be a request scheduled
        earlier in the step, which held its place in the cap (vLLM's priority victim)."""
        records, decoded = self.requests.records, event.decoded
        count = 0
        for rid in among:
            record = records.get(rid)
            if record is None or not computed.get(rid):
                continue
            produced = record.generated - record.admitted_with
            if produced == 0 or (produced == 1 and rid in decoded):
                count += 1
        if self.properties.declared_order == "priority":
            count += len(event.preempted)
        return count

    def slot_free(self) -> bool:
        """Whether the batch has a slot free: BATCH-3 has nothing to judge otherwise."""
        return len(self.requests.active) < self.limits.batch_limit

    def check_idle_slot(
        self, n: int, event: IterationEvent, computed: Mapping[str, int], head: str | None
    ) -> Finding | None:
        """BATCH-3: a free slot while the declared order's next request fits (3.2; eventlog.md
        4.6 if lazy). Estimate-based admission promises no work conservation; a padded budget
        and first-only chunking are counted as the target counts them."""
        requests, properties = self.requests, self.properties
        if "BATCH-3" not in self.applicable or head is None or event.preempted:
            return None
        if len(requests.active) >= self.limits.batch_limit:
            return None
        if len(requests.active) >= properties.running_limit(self.limits):
            requests.tally.slotless(n)  # every declared state slot is held (SLOT-1)
            return None
        if properties.estimate_admission:  # no work conservation promised: left unjudged
            requests.tally.unjudged_slots += 1
            return None
        history = requests.live[head].known()
        if properties.token_budget is not None:
            spent = [amount for amount in computed.values() if amount]
            most = max(spent) if spent else 0
            if not self.budget_left(len(spent), sum(spent), history + 1, most):
                return None
        free = self.pages.room(n)  # less what an asynchronous target's fence holds
        needed, room = self.head_room(head, history, free, requests.committed)
        if room - properties.watermark_pages < needed:
            if room >= needed:  # but for the watermark
                requests.tally.watermarked(n)
            elif properties.admission != "peak" and free < self.pages.free:
                unfenced = self.pages.free - properties.watermark_pages
                if unfenced >= needed:  # it fitted but for the pages fenced for the step in flight
                    requests.tally.fenced(n)
            return None
        if properties.admission == "peak":
            why = (
                f"its {needed} peak pages fit beside the {requests.committed} the batch "
                f"commits in a pool of {self.pages.usable}"
            )
        else:
            why = f"{plural(free, 'page')} were free and it needs at most {needed}"
        return Finding(
            "BATCH-3",
            n,
            f"iteration {n} ran {len(requests.active)} of "
            f"{self.limits.batch_limit} slots while {head!r} waited at the head of the "
            f"queue and fitted: {why}",
            requests=(head,),
        )

    def head_room(self, head: str, history: int, free: int, committed: int) -> tuple[int, int]:
        """The pages the head of the queue (``history`` tokens known) needs to join, and the
        pages it may take them from: its peak beside the batch's commitment under peak
        admission, else what it needs now among the ``free`` pages."""
        if self.properties.admission == "peak":
            return self.requests.reservation(head), self.pages.usable - committed
        return pages_for(history + 1, self.limits.page_size), free

    def budget_left(self, spent: int, total: int, whole: int, most: int) -> bool:
        """Whether the head (``whole`` tokens to compute) could still join under the declared
        budget and chunking, ``spent`` requests having computed ``total`` tokens, at most
        ``most`` each."""
        properties = self.properties
        budget = properties.token_budget or 0
        chunking = properties.declared_chunking
        may_chunk = chunking == "all" or (chunking == "first" and not spent)
        need = 1 if may_chunk else whole
        summed = budget - total >= need
        if properties.budget == "padded":
            padded = (spent + 1) * max(need, most) <= budget
            self.requests.tally.padded += summed and not padded  # what padding alone refused
            return padded
        return summed

    def head_cannot_join(
        self, head: str | None, free: int, committed: int, spent: int, computed: int
    ) -> bool:
        """Whether a slot left free while ``head`` waits gives BATCH-3 nothing to judge and
        nothing to excuse: the head lacks the budget, or the pages even without the watermark.
        ``free`` and ``committed`` are as the schedule left them; ``spent`` requests computed
        ``computed`` tokens.
        Where a declaration's excuse is counted as the slot is judged (estimated admission, a
        padded budget), the full path judges it."""
        properties = self.properties
        if head is None:
            return True
        if properties.estimate_admission or properties.budget == "padded":
            return False
        history = self.requests.live[head].known()
        budget = properties.token_budget
        if budget is not None and not self.budget_left(spent, computed, history + 1, 0):
            return True
        needed, room = self.head_room(head, history, free, committed)
        return room < needed
