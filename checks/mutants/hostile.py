"""Schedulers that break the protocol itself: they raise, answer garbage or never return.

A hostile target must get a verdict (PROTO-1), never a crash or a hang of kvsched.
"""

from __future__ import annotations

from kvsched.checks.mutants.mutant import Mutant
from kvsched.reference.continuous import ContinuousScheduler
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome


class RaisesMidRun(ContinuousScheduler):
    """``schedule()`` raises once a third request has arrived."""

    def schedule(self) -> ScheduledBatch:
        if len(self.waiting) + len(self.running) >= 3:
            raise KeyError("slot table corrupted")  # BUG
        return super().schedule()


class AnswersGarbage(ContinuousScheduler):
    """``update_from_output()`` returns a dict instead of a StepOutcome."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        outcome = super().update_from_output(output)
        return {"finished": outcome.finished}  # type: ignore[return-value]  # BUG


class HangsInSchedule(ContinuousScheduler):
    """``schedule()`` loops forever once the batch is full."""

    def schedule(self) -> ScheduledBatch:
        batch = super().schedule()
        while len(self.running) >= self.limits.batch_limit > 1:  # BUG: never exits
            pass
        return batch


MUTANTS: tuple[Mutant, ...] = (
    Mutant("raises", "schedule() raises mid-run", "PROTO-1", f"{__name__}:RaisesMidRun"),
    Mutant("garbage answer", "update_from_output() returns a dict", "PROTO-1",
           f"{__name__}:AnswersGarbage"),
    Mutant("hangs", "schedule() loops forever", "PROTO-1", f"{__name__}:HangsInSchedule",
           timeout=0.5),
)  # fmt: skip
"""This module's mutants, for the zoo (:mod:`.zoo`)."""
