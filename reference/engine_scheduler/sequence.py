"""A request as the engine scheduler tracks it: nano-vllm's ``Sequence``, its state on itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from kvsched.spec.workload import Request


class Status(Enum):
    """Where a request is (nano-vllm's ``SequenceStatus``)."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


# Identity equality: a request is one object for its whole life, and the queues' membership tests
# and removals would otherwise compare every field, request and page table included.
@dataclass(eq=False)
class Seq:
    """A request as the engine tracks it (nano-vllm's ``Sequence``)."""

    request: Request
    index: int
    """Arrival position: ties in every order break by it."""
    status: Status = Status.WAITING
    generated: int = 0
    computed: int = 0
    """Tokens whose KV the table holds (vLLM's ``num_computed_tokens``)."""
    table: list[int] = field(default_factory=list)
    admitted_with: int = 0
    """Its output tokens when it was last admitted: until it produces another it is in its
    prefill (vLLM's ``is_prefill_chunk``), which ``max_partial_prefills`` caps."""
    registered: int = 0
    """Leading full pages already in the prefix cache."""
    hashes: list[int] = field(default_factory=list, repr=False)
    """Chain hashes of the leading full pages, as far as they were needed: a page's hash follows
    from the request's tokens up to it, so it holds across preemptions."""
    id: str = field(init=False)
    tokens: int = field(init=False)
    """Positions to compute before the next token is sampled. An empty prompt starts from one
    position of its own (as a start token would), so its first token is computed from something
    (DEC-3): the lesson's accounting, where the KV includes the token produced."""
    _pages: tuple[int, ...] = field(default=(), init=False, repr=False)
    _pages_of: list[int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # Kept as state rather than derived: the loop reads both for every request, every
        # iteration.
        self.id = self.request.id
        prompt = self.request.prompt_tokens
        self.tokens = prompt + self.generated + (1 if prompt == 0 else 0)

    def append(self, count: int) -> None:
        """The model produced ``count`` tokens."""
        self.generated += count
        self.tokens += count

    def pages(self) -> tuple[int, ...]:
        """The table as a batch reports it: the very same tuple while the table is unchanged,
        which the engine recognises without reading it again (engine.py, ``checked``). A table
        only grows in place or is replaced, so its object and length tell whether it changed."""
        if self._pages_of is not self.table or len(self._pages) != len(self.table):
            self._pages, self._pages_of = tuple(self.table), self.table
        return self._pages
