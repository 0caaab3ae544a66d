"""Planted bugs of a second resource beside the pages: per-request state slots (SLOT-1, SLOT-2).

A hybrid model keeps each running request's recurrent state in one slot of a fixed pool (SGLang's
mamba slots). Each class below is reference/engine_scheduler/'s vLLM v1 design with a pool of two
slots (:data:`~kvsched.reference.engine_scheduler.HYBRID`), declaring ``state_slots``, with one
slot bug put in:

- :class:`KeepsSlotOnFailedAdmission`, SGLang #16067: admission takes the request's slot, the page
  allocation then fails, and the request goes back to the queue still holding it (SLOT-2, after
  the schedule); the slot is lost to the pool;
- :class:`FreesSlotTwice`: a preempted request's slot is given back twice, so the free list holds
  it twice and counts one slot too many, and two later admissions may share it (SLOT-1);
- :class:`KeepsSlotOnAbort`, SGLang #12693: a request its client aborts leaves the batch with its
  pages given back but not its slot (SLOT-2, after the update). Its design aborts, as a client
  would, every request with an odd prompt once it has its first token, and declares
  ``stops_early``; its twin :class:`AbortsOddPrompts` gives the slot back.

The first two show only on a workload whose pool runs short: the default check's search must draw
one whose admissions or running requests outgrow the pages. Each mutant's twin is its correct
design (:data:`TWINS`), which the zoo's tests check clean.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from kvsched.checks.mutants.engine import V1
from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.engine_scheduler import HYBRID, EngineConfig
from kvsched.reference.engine_scheduler.scheduler import Step
from kvsched.reference.engine_scheduler.sequence import Seq, Status
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ModelOutput, StepOutcome


class HybridV1(V1):
    """The correct design with two state slots: the twin of this module's mutants."""

    config: EngineConfig = HYBRID
    properties: TargetProperties = HYBRID.properties()


class KeepsSlotOnFailedAdmission(HybridV1):
    """SGLang #16067: the slot taken for an admission whose page allocation then fails stays
    with the request, which goes back to the queue holding it."""

    def _admission_failed(self, seq: Seq) -> None:
        return None  # the bug: the slot is not given back


class FreesSlotTwice(HybridV1):
    """A preempted request's slot goes back to the free list twice: the pool counts a slot it
    does not have, and hands one slot to two requests."""

    def _preempt(self, step: Step, seq: Seq) -> None:
        slot = self.slot_of.get(seq.id)
        super()._preempt(step, seq)
        if slot is not None:
            heapq.heappush(self.free_slots, slot)  # the bug: given back a second time


class AbortsOddPrompts(HybridV1):
    """The hybrid design under clients that abort: every request with an odd prompt is aborted
    once it has its first token, and leaves the batch with its pages and its slot given back
    (the twin of :class:`KeepsSlotOnAbort`)."""

    properties = replace(HYBRID.properties(), stops_early=True)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        finished, freed = list(outcome.finished), dict(outcome.freed)
        for seq in list(self.running):
            if seq.request.prompt_tokens % 2 and seq.generated >= 1:
                self.running.remove(seq)
                seq.status = Status.FINISHED
                self.blocks.release(seq.table)
                freed[seq.id], seq.table = tuple(seq.table), []
                self._slot_on_abort(seq)
                finished.append(seq.id)
        slots = self._slots()
        free = None if slots is None else len(self.free_slots)
        return StepOutcome(tuple(finished), freed, self.blocks.free_count, slots, free)

    def _slot_on_abort(self, seq: Seq) -> None:
        self._give_slot(seq)


class KeepsSlotOnAbort(AbortsOddPrompts):
    """SGLang #12693: an aborted request's pages are given back, its state slot is not."""

    def _slot_on_abort(self, seq: Seq) -> None:
        return None  # the bug: the abort path forgets the slot


TWINS: dict[type[V1], type[V1]] = {
    KeepsSlotOnFailedAdmission: HybridV1,
    FreesSlotTwice: HybridV1,
    KeepsSlotOnAbort: AbortsOddPrompts,
}
"""Each mutant's correct design, which must check clean."""


MUTANTS: tuple[Mutant, ...] = (
    Mutant("slot kept on a failed admission", "a state slot taken for an admission whose pages "
           "then fail stays with the request sent back to the queue", "SLOT-2",
           f"{__name__}:KeepsSlotOnFailedAdmission"),
    Mutant("slot freed twice", "a preempted request's state slot is given back twice", "SLOT-1",
           f"{__name__}:FreesSlotTwice"),
    Mutant("slot kept on abort", "an aborted request gives back its pages but not its state "
           "slot", "SLOT-2", f"{__name__}:KeepsSlotOnAbort"),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`): classes the default check's search must
draw a tight pool for."""
