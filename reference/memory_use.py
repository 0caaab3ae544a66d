"""What each slot of KV memory holds, counted over a run: the vLLM paper's Figure 2 categories.

At every measured iteration each slot of the pool is counted in exactly one place
(docs/figure2.md gives the definitions):

- **token states**: it holds the KV of a token its request has computed;
- **reservation**: it is in a request's allocation, at a position the request's own tokens will
  reach (below its prompt plus its true output), not yet written;
- **internal fragmentation**: it is in the part of a request's allocation the request asked for
  but will never write (at or past its prompt plus its true output);
- **external & other**: the allocator's rounding of an allocation beyond what was asked (a
  buddy block's tail), and every slot no request holds.

The four counts sum to the pool's slots times the iterations measured, in integers, so the
shares sum to 100% up to rounding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kvsched.spec.vocabulary import MemoryUse, Reservation
from kvsched.spec.workload import Request


@dataclass(eq=False)  # one request's entry; the runs look it up by identity
class Held:
    """A request in the batch and the memory it holds (the runs' own, mutable, state)."""

    request: Request
    generated: int
    """Output tokens computed so far, those before a preemption included."""
    requested: int
    """Slots the request asked for: its prompt plus its reserved output, or its pages' slots."""
    slots: int
    """Slots the allocator gave: ``requested`` rounded up to a block, or the pages' slots."""
    handle: int | list[int]
    """The block's offset, or the page ids."""

    @property
    def kv(self) -> int:
        return self.request.prompt_tokens + self.generated

    @property
    def final(self) -> int:
        return self.request.prompt_tokens + self.request.output_tokens


@dataclass(frozen=True)
class MemoryShares:
    """Slot-iterations of one run in each category, over the iterations in which a request
    waited after admission (the pool is then under full demand)."""

    reservation: Reservation
    pool_slots: int
    iterations: int
    """Iterations measured."""
    all_iterations: int
    """Iterations of the whole run, the drain after the last admission included."""
    token_states: int
    reserved: int
    internal: int
    rounding: int
    """Allocator rounding: slots of a block beyond what its request asked for."""
    free: int
    """Slots held by no request."""
    batched: int
    """Requests in the batch, summed over the iterations measured."""
    lengths: int
    """Their prompt plus true output tokens, summed the same way."""
    preemptions: int

    @property
    def total(self) -> int:
        return self.pool_slots * self.iterations

    @property
    def counts(self) -> dict[MemoryUse, int]:
        return {
            "token states": self.token_states,
            "reservation": self.reserved,
            "internal fragmentation": self.internal,
            "external & other": self.rounding + self.free,
        }

    def share(self, use: MemoryUse) -> float:
        """The time-averaged share of the pool in ``use``, a fraction."""
        return self.counts[use] / self.total if self.total else 0.0

    @property
    def mean_batch(self) -> float:
        return self.batched / self.iterations if self.iterations else 0.0

    @property
    def mean_length_held(self) -> float:
        """A batched request's prompt plus output, averaged over time: a long request stays
        longer, so this exceeds the workload's mean length."""
        return self.lengths / self.batched if self.batched else 0.0


class Tally:
    """The counts so far, one measured iteration at a time."""

    def __init__(self, pool_slots: int) -> None:
        self.pool_slots = pool_slots
        self.iterations = self.token_states = self.reserved = self.internal = 0
        self.rounding = self.free = self.batched = self.lengths = 0

    def observe(self, batch: Iterable[Held]) -> None:
        # Local names and no property calls: this runs over the batch every iteration.
        held = token = reserved = internal = rounding = batched = lengths = 0
        for h in batch:
            request = h.request
            kv = request.prompt_tokens + h.generated
            final = request.prompt_tokens + request.output_tokens
            requested = h.requested
            reach = final if final < requested else requested  # a page table may end short
            assert kv <= reach and requested <= h.slots, h
            token += kv
            reserved += reach - kv
            internal += requested - reach
            rounding += h.slots - requested
            held += h.slots
            batched += 1
            lengths += final
        assert held <= self.pool_slots, (held, self.pool_slots)
        self.token_states += token
        self.reserved += reserved
        self.internal += internal
        self.rounding += rounding
        self.batched += batched
        self.lengths += lengths
        self.free += self.pool_slots - held
        self.iterations += 1

    def shares(
        self, reservation: Reservation, all_iterations: int, preemptions: int
    ) -> MemoryShares:
        return MemoryShares(
            reservation=reservation,
            pool_slots=self.pool_slots,
            iterations=self.iterations,
            all_iterations=all_iterations,
            token_states=self.token_states,
            reserved=self.reserved,
            internal=self.internal,
            rounding=self.rounding,
            free=self.free,
            batched=self.batched,
            lengths=self.lengths,
            preemptions=preemptions,
        )
