"""What the target's declarations excused: counted where each relaxation is applied.

A declaration such as ``stops_early`` or ``watermark_pages`` makes the monitor accept what it
would otherwise report; a target can make one to hide a bug (declaring early stops and dropping
every token after the first). So each rule that a declaration relaxes counts, in the one place it
is applied, what it let through, in a :class:`Tally` the ledgers share; the verdict says what
each declaration excused in the run (:mod:`kvsched.checks.verdict.declarations`), and
``kvsched check --grade`` refuses the declarations the grader did not allow. Each count costs O(1)
where it is taken, and only a declared relaxation takes one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


class Tally:
    """The live counts of one monitored run (what :class:`Excused` says of it, field by field)."""

    def __init__(self) -> None:
        self.stopped_early = 0
        self.fewest_tokens = -1  # -1: no early stop yet
        self.most_tokens = 0
        self.from_queue = 0
        self.unjudged_heads = 0
        self.unjudged_at = 0  # the iteration last counted: two checks ask for the head
        self.preemptions = 0
        self.folds = 0
        self.folded_tokens = 0
        self.thrash = 0
        self.shared_pages = 0
        self.reserved_over = 0
        self.extra_pages = 0
        self.watermark = 0
        self.watermarked_at = 0
        self.unjudged_slots = 0
        self.padded = 0
        self.unordered = 0
        self.requeued_at_tail = 0
        self.overcommitted = 0
        self.overcommitted_at = 0
        self.allowance = 0
        self.capped_prefills = 0
        self.capped_at = 0
        self.fenced_heads = 0
        self.fenced_at = 0
        self.fenced_waits = 0
        self.slotless_heads = 0
        self.slotless_at = 0

    def stop_early(self, made: int, from_queue: bool) -> None:
        """A request finished after ``made`` tokens, short of its most (stops_early)."""
        self.stopped_early += 1
        self.from_queue += from_queue
        self.most_tokens = max(self.most_tokens, made)
        fewest = self.fewest_tokens
        self.fewest_tokens = made if fewest < 0 else min(fewest, made)

    def preempted(self, allowed: int, moved: int) -> None:
        """A preemption (``preemption``) that grew LIVE-1's bound by ``allowed`` iterations, and
        folded ``moved`` prompt tokens into the output (``restart="fold"``)."""
        self.preemptions += 1
        self.allowance += allowed
        self.folds += moved > 0
        self.folded_tokens += moved

    def unjudged_head(self, n: int) -> None:
        if self.unjudged_at != n:
            self.unjudged_at = n
            self.unjudged_heads += 1

    def watermarked(self, n: int) -> None:
        if self.watermarked_at != n:
            self.watermarked_at = n
            self.watermark += 1

    def overcommit(self, n: int) -> None:
        if self.overcommitted_at != n:
            self.overcommitted_at = n
            self.overcommitted += 1

    def fenced(self, n: int) -> None:
        """Iteration ``n`` let a head wait that fitted but for pages fenced for the step in
        flight (async_scheduling, BATCH-3 and LIVE-2)."""
        if self.fenced_at != n:
            self.fenced_at = n
            self.fenced_heads += 1

    def slotless(self, n: int) -> None:
        """Iteration ``n`` left a batch slot idle while every declared state slot was held
        (state_slots, BATCH-3)."""
        if self.slotless_at != n:
            self.slotless_at = n
            self.slotless_heads += 1

    def capped(self, n: int) -> None:
        """Iteration ``n`` left a prefill of the batch waiting for the declared cap
        (max_partial_prefills, BATCH-6)."""
        if self.capped_at != n:
            self.capped_at = n
            self.capped_prefills += 1

    def over_reservation(self, extra: int) -> None:
        """A request held ``extra`` pages beyond its KV's, within its reservation."""
        self.reserved_over += 1
        self.extra_pages = max(self.extra_pages, extra)

    def excused(self, finished: int, past_bound: int) -> Excused:
        """The run's counts, frozen: ``finished`` requests finished, and how far the run went
        past the lesson's LIVE-1 bound (0: within it)."""
        counted = {f.name: getattr(self, f.name) for f in fields(Excused) if hasattr(self, f.name)}
        return Excused(
            runs=1,
            finished=finished,
            past_bound_runs=int(past_bound > 0),
            past_bound=past_bound,
            **counted,
        )


@dataclass(frozen=True)
class Excused:
    """What the declarations excused over one or more monitored runs (``+`` adds runs up)."""

    runs: int = 0
    finished: int = 0
    """Requests finished, early or not."""
    stopped_early: int = 0
    """Requests finished before their output length (stops_early, REQ-2)."""
    fewest_tokens: int = -1
    """The fewest output tokens an early-stopped request made; -1: none stopped early."""
    most_tokens: int = 0
    from_queue: int = 0
    """Early stops from the waiting queue (aborts)."""
    unjudged_heads: int = 0
    """Iterations in which BATCH-3 and LIVE-2 judged no head, after an abort from the queue."""
    preemptions: int = 0
    """Requests that left the batch unfinished, to come back (preemption, REQ-2)."""
    folds: int = 0
    """Preemptions within a prefill whose fold restart moved prompt tokens to the output."""
    folded_tokens: int = 0
    thrash: int = 0
    """Preemptions again with no progress in between, which LIVE-3 would have reported."""
    shared_pages: int = 0
    """Pages taken by reference while another request held them (prefix sharing, PAGE-2)."""
    reserved_over: int = 0
    """Request-iterations holding more pages than their KV needs (reserve-ahead, PAGE-1)."""
    extra_pages: int = 0
    """The most pages one request held beyond its KV's."""
    watermark: int = 0
    """Iterations in which BATCH-3 or LIVE-2 let a head wait that fitted but for the watermark."""
    unjudged_slots: int = 0
    """Iterations with a free slot and a waiting request that BATCH-3 did not judge
    (estimate_admission)."""
    padded: int = 0
    """Iterations in which a padded budget let the head wait where the tokens' sum fitted."""
    unordered: int = 0
    """Admissions not judged for their order (a declared order "none", BATCH-4)."""
    requeued_at_tail: int = 0
    """Preempted requests that rejoined the queue at its tail (``requeue="tail"``, BATCH-4)."""
    overcommitted: int = 0
    """Iterations in which the batch's peak pages exceeded the pool (lazy admission, PAGE-5)."""
    capped_prefills: int = 0
    """Iterations in which a prefill of the batch waited because the declared cap on partial
    prefills was reached (max_partial_prefills, BATCH-6)."""
    fenced_heads: int = 0
    """Iterations in which BATCH-3 or LIVE-2 let a head wait that fitted but for pages fenced
    for the step in flight (async_scheduling)."""
    fenced_waits: int = 0
    """Iterations LIVE-1's bound grew by for an iteration that waited for the fence
    (async_scheduling); counted in ``allowance`` too."""
    slotless_heads: int = 0
    """Iterations in which BATCH-3 let a batch slot idle while a request waited, every declared
    state slot being held (state_slots)."""
    allowance: int = 0
    """Iterations LIVE-1's bound grew by for chunked prefills, recompute and folds."""
    past_bound_runs: int = 0
    """Runs that went past the lesson's LIVE-1 bound, within the allowance."""
    past_bound: int = 0
    """The most iterations a run went past the lesson's bound."""

    def __add__(self, other: Excused) -> Excused:
        """Both runs' counts: extremes of extremes, sums of the rest."""
        sums = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        tokens = [n for n in (self.fewest_tokens, other.fewest_tokens) if n >= 0]
        sums["fewest_tokens"] = min(tokens, default=-1)
        for name in ("most_tokens", "extra_pages", "past_bound"):
            sums[name] = max(getattr(self, name), getattr(other, name))
        return Excused(**sums)
