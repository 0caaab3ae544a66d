"""The reference schedulers as a transition system over Z3 terms (spec/semantics.md, sections 3-5).

A *state* is the scheduler between two iterations: the time ``t`` (iterations done), the free
page count, the committed pages, and per request its phase (waiting, active, finished), the
tokens it generated, the pages it holds and the iterations it was admitted in and finished in.
Physical page ids are abstracted to counts (what PAGE-1/3/4/5 speak about); PAGE-2, a property of
which ids the pool hands out, is outside this model (spec/proofs.md says why). Its scope is the
lesson model's two reference policies: :mod:`.scope` says so in code, and :class:`Rules` refuses
any other policy or declaration.

:func:`iteration` is one iteration, step by step as section 3 orders it: arrival (3.1), FCFS
admission under the batch limit and the peak-page commitment (3.2), page growth (3.3), one token
per active request (3.4), finishing and freeing (3.5). The waiting queue is never stored: it is
the arrived, not yet admitted requests in *admission order* (by arrival, ties in declared order),
which is exactly the reference's queue because it only ever pops its head.

:class:`Rules` switches one rule off to make a deliberately broken scheduler, so the bounded
model checker can show that the proofs would catch it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.lesson_scope import model_scope
from kvsched.checks.proofs.page_lemmas import lemma_instances
from kvsched.checks.proofs.workload import SymbolicWorkload
from kvsched.spec.properties import TargetProperties

WAITING, ACTIVE, FINISHED = 0, 1, 2


@dataclass(frozen=True)
class Rules:
    """The scheduler being modelled: a policy, and which of the reference's rules it keeps."""

    policy: str  # "static" or "continuous"
    admit_mid_batch: bool = False
    """Broken static batching: admission open while a batch runs (BATCH-2)."""
    commit_peak: bool = True
    """Admit against the batch's peak pages (3.2); off: against the free pages right now."""
    free_on_finish: bool = True
    """A finishing request returns its pages (3.5); off: they leak (PAGE-3, PAGE-4)."""
    stop_at_head: bool = True
    """FCFS: admission stops at the first request that does not fit; off: later ones overtake."""

    def __post_init__(self) -> None:
        # Any other name would silently get continuous batching's open admission.
        model_scope(TargetProperties(policy=self.policy)).require("the Z3 model")

    @classmethod
    def of(cls, properties: TargetProperties) -> Rules:
        """The reference rules for a target declaring ``properties``; OutOfScope if none fit."""
        model_scope(properties).require("the Z3 model")
        return cls(properties.policy)


BROKEN: dict[str, Rules] = {
    "static-admits-mid-batch": Rules("static", admit_mid_batch=True),
    "admits-by-free-pages": Rules("continuous", commit_peak=False),
    "finished-keeps-pages": Rules("continuous", free_on_finish=False),
    "admission-overtakes": Rules("continuous", stop_at_head=False),
}


@dataclass(frozen=True)
class State:
    """The scheduler between iterations; ``start``/``finish`` mean something once admitted/done."""

    t: Any
    free: Any
    committed: Any
    phase: tuple[Any, ...]
    generated: tuple[Any, ...]
    held: tuple[Any, ...]
    start: tuple[Any, ...]
    finish: tuple[Any, ...]

    @property
    def size(self) -> int:
        return len(self.phase)


def fresh_state(size: int, tag: str) -> State:
    def ints(name: str) -> tuple[Any, ...]:
        return tuple(z3.Int(f"{tag}_{name}_{i}") for i in range(size))

    return State(
        t=z3.Int(f"{tag}_t"),
        free=z3.Int(f"{tag}_free"),
        committed=z3.Int(f"{tag}_committed"),
        phase=ints("phase"),
        generated=ints("generated"),
        held=ints("held"),
        start=ints("start"),
        finish=ints("finish"),
    )


def initial(s: State, w: SymbolicWorkload) -> list[Any]:
    """Before iteration 1: nothing generated, nothing held, the whole pool free."""
    facts = [s.t == 0, s.free == w.pool_pages, s.committed == 0]
    for i in range(s.size):
        facts += [s.phase[i] == WAITING, s.generated[i] == 0, s.held[i] == 0]
        facts += [s.start[i] == 0, s.finish[i] == 0]
    return facts


@dataclass(frozen=True)
class Iteration:
    """The terms of one iteration, for reading a trajectory and stating step properties."""

    number: Any
    eligible: tuple[Any, ...]
    """Arrived and waiting before admission: the waiting queue, as a set."""
    admitted: tuple[Any, ...]
    batch_sizes: tuple[Any, ...]
    """Batch size before the admission loop looks at request k (k = size: after the loop)."""
    commitments: tuple[Any, ...]
    """Committed pages before the admission loop looks at request k (k = size: after it)."""
    running: tuple[Any, ...]
    """The batch while it decodes: active before, or admitted now (3.2)."""
    pages_during: tuple[Any, ...]
    """Pages held while decoding, after growth (3.3): the event's page-table sizes."""
    tokens: tuple[Any, ...]
    finished: tuple[Any, ...]
    page_facts: tuple[Any, ...]
    """Instances of the page lemmas at this iteration's token counts (see z3_pages)."""

    @property
    def committed_during(self) -> Any:
        return self.commitments[-1]


def iteration(s: State, w: SymbolicWorkload, rules: Rules) -> Iteration:
    """Iteration ``s.t + 1`` from state ``s`` (sections 3.1-3.5)."""
    size = s.size
    number = s.t + 1
    eligible = tuple(z3.And(s.phase[i] == WAITING, w.arrival[i] < number) for i in range(size))
    active_now = [s.phase[i] == ACTIVE for i in range(size)]
    if rules.policy == "static" and not rules.admit_mid_batch:
        open_ = z3.Not(z3.Or(*active_now))  # 5.1: a batch forms only when none is active
    else:
        open_ = z3.BoolVal(True)  # 5.2
    # 3.2 as the reference's loop: walk the queue from its head while the head fits.
    batch_sizes = [z3.Sum([z3.If(a, 1, 0) for a in active_now])]
    commitments = [s.committed]
    claimed = z3.IntVal(0)  # first pages of this iteration's admissions (commit_peak off)
    stopped = z3.BoolVal(False)  # an earlier queued request did not fit: FCFS stops there
    admitted: list[Any] = []
    for i in range(size):
        first = w.pages(w.prompt[i] + 1)
        if rules.commit_peak:
            fits = commitments[i] + w.peak(i) <= w.pool_pages
        else:
            fits = claimed + first <= s.free
        admit = z3.And(open_, eligible[i], z3.Not(stopped), batch_sizes[i] < w.batch_limit, fits)
        if rules.stop_at_head:
            stopped = z3.Or(stopped, z3.And(eligible[i], z3.Not(admit)))
        batch_sizes.append(batch_sizes[i] + z3.If(admit, 1, 0))
        commitments.append(commitments[i] + z3.If(admit, w.peak(i), 0))
        claimed = claimed + z3.If(admit, first, 0)
        admitted.append(admit)
    running = tuple(z3.Or(active_now[i], admitted[i]) for i in range(size))
    pages_during, tokens, finished, page_facts = [], [], [], []
    for i in range(size):
        context = w.prompt[i] + s.generated[i]
        need = w.pages(context + 1)  # pages for this iteration's token, and no more (3.3)
        page_facts += lemma_instances(w.pages, context, w.prompt[i] + w.output[i])
        pages_during.append(z3.If(running[i], z3.If(need > s.held[i], need, s.held[i]), s.held[i]))
        tokens.append(z3.If(running[i], 1, 0))  # exactly one token per active request (3.4)
        finished.append(z3.And(running[i], s.generated[i] + 1 >= w.output[i]))
    return Iteration(
        number=number,
        eligible=eligible,
        admitted=tuple(admitted),
        batch_sizes=tuple(batch_sizes),
        commitments=tuple(commitments),
        running=running,
        pages_during=tuple(pages_during),
        tokens=tuple(tokens),
        finished=tuple(finished),
        page_facts=tuple(page_facts),
    )


def successor(s: State, it: Iteration, w: SymbolicWorkload, rules: Rules) -> State:
    """The state after iteration ``it``: finished requests leave and free their pages (3.5)."""
    size = s.size
    if rules.free_on_finish:
        held = tuple(z3.If(it.finished[i], 0, it.pages_during[i]) for i in range(size))
    else:
        held = it.pages_during
    taken = z3.Sum([it.pages_during[i] - s.held[i] for i in range(size)])
    returned = z3.Sum([it.pages_during[i] - held[i] for i in range(size)])
    released_commitment = z3.Sum([z3.If(it.finished[i], w.peak(i), 0) for i in range(size)])
    return State(
        t=it.number,
        free=s.free - taken + returned,
        committed=it.committed_during - released_commitment,
        phase=tuple(
            z3.If(it.finished[i], FINISHED, z3.If(it.running[i], ACTIVE, s.phase[i]))
            for i in range(size)
        ),
        generated=tuple(s.generated[i] + it.tokens[i] for i in range(size)),
        held=held,
        start=tuple(z3.If(it.admitted[i], it.number, s.start[i]) for i in range(size)),
        finish=tuple(z3.If(it.finished[i], it.number, s.finish[i]) for i in range(size)),
    )


def transition(
    s: State, nxt: State, w: SymbolicWorkload, rules: Rules
) -> tuple[Iteration, list[Any]]:
    """One iteration from ``s`` to the fresh state ``nxt``, as constraints binding ``nxt``."""
    it = iteration(s, w, rules)
    after = successor(s, it, w, rules)
    return it, [*it.page_facts, *equal(nxt, after)]


def equal(a: State, b: State) -> list[Any]:
    pairs = [(a.t, b.t), (a.free, b.free), (a.committed, b.committed)]
    for name in ("phase", "generated", "held", "start", "finish"):
        pairs += zip(getattr(a, name), getattr(b, name), strict=True)
    return [x == y for x, y in pairs]
