"""What a declared restart does to each request's tokens (spec/eventlog.md 4.3.1).

Under ``restart: "fold"`` a request preempted within its prefill comes back with a shorter
prompt and owes the rest of the old one as output tokens. Whoever plays the model runner must
then stop it later, and the iteration bound must wait for those tokens, so both follow each
request's record (:mod:`.record`): its tokens, its KV since it was last admitted and whether
it produced a token since. The rule itself is
:meth:`kvsched.spec.properties.TargetProperties.moved_on_restart`.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Request

from .record import Records


class Restarts:
    """The records of a run's requests, as the model runner follows them under a fold."""

    def __init__(self, properties: TargetProperties | None, page_size: int) -> None:
        self.records = Records(properties, page_size)
        self.folds = self.records.properties.restart == "fold"

    def follow(
        self, arrivals: Sequence[Request], batch: ScheduledBatch, owed: MutableMapping[str, int]
    ) -> None:
        """One iteration's schedule, as the model runner sees it: ``owed`` (output tokens each
        request still owes) grows by what each preemption's fold moves to the output. Under
        recompute nothing moves, and nothing is followed."""
        if not self.folds:
            return
        records = self.records
        for request in arrivals:
            records.declare(request)
        for rid in batch.preempted:
            moved = records.preempt(rid)[1]
            if rid in owed:
                owed[rid] += moved
        for rid in batch.admitted:
            records.admit(rid)
        records.count(batch.computed or {}, batch.cached, batch.decode)
