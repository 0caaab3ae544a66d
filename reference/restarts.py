"""What a declared restart does to each request's tokens (spec/eventlog.md 4.3.1).

Under ``restart: "fold"`` a request preempted within its prefill comes back with a shorter
prompt and owes the rest of the old one as output tokens. Whoever plays the model runner must
then stop it later, and the iteration bound must wait for those tokens, so both follow each
request's tokens, its KV since it was last admitted and whether it produced a token since.
The rule itself is :meth:`kvsched.spec.properties.TargetProperties.moved_on_restart`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence

from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import ScheduledBatch
from kvsched.spec.workload import Request


class Restarts:
    """Per request: its prompt plus output so far, its KV, and whether it decodes."""

    def __init__(self, properties: TargetProperties | None = None) -> None:
        self.properties = properties = properties or TargetProperties()
        self.folds = properties.restart == "fold"
        self.tokens: dict[str, int] = {}
        self.kv: Counter[str] = Counter()
        self.decoding: set[str] = set()

    def follow(
        self, arrivals: Sequence[Request], batch: ScheduledBatch, owed: MutableMapping[str, int]
    ) -> None:
        """One iteration's schedule, as the model runner sees it: ``owed`` (output tokens each
        request still owes) grows by what each preemption's fold moves to the output. Under
        recompute nothing moves, and nothing is followed."""
        if not self.folds:
            return
        for request in arrivals:
            self.arrive(request.id, request.prompt_tokens)
        for rid in batch.preempted:
            moved = self.preempt(rid)[1]
            if rid in owed:
                owed[rid] += moved
        for rid in batch.admitted:
            self.admit(rid)
        self.step(batch.computed or {}, batch.cached, batch.decode)

    def arrive(self, request_id: str, prompt_tokens: int) -> None:
        self.tokens[request_id] = prompt_tokens

    def preempt(self, request_id: str) -> tuple[int, int]:
        """The KV tokens ``request_id`` loses, and the prompt tokens its restart moves to its
        output."""
        lost = self.kv.pop(request_id, 0)
        tokens = self.tokens.get(request_id, 0)
        moved = self.properties.moved_on_restart(tokens, lost, request_id in self.decoding)
        self.tokens[request_id] = tokens - moved
        self.decoding.discard(request_id)
        return lost, moved

    def admit(self, request_id: str) -> None:
        self.decoding.discard(request_id)

    def step(
        self, computed: Mapping[str, int], cached: Mapping[str, int], decoded: Iterable[str]
    ) -> None:
        for amounts in (computed, cached):
            for rid, amount in amounts.items():
                self.kv[rid] += amount
        if not self.folds:  # only a fold reads tokens and decoding: spare the loop its cost
            return
        for rid in decoded:
            self.tokens[rid] = self.tokens.get(rid, 0) + 1
            self.decoding.add(rid)

    def finish(self, request_id: str) -> None:
        self.kv.pop(request_id, None)
        self.decoding.discard(request_id)
