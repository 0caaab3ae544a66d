"""What a check's request predicate reads (:class:`~.registry.Steady`): a request a steady line
names, as the event-log checker's fast path sees it at the line's end.

A class of its own, compiled with the fast path (setup.py): one is made for every request a
steady line names, which a tuple type made in Python would cost several times over.
"""

from __future__ import annotations


class SteadyRequest:
    """A request a steady line names (it grows, finishes, starts decoding or computes its
    prompt or a chunk of it): its counts at the line's end, lazy steps included."""

    __slots__ = ("decodes", "finishes", "generated", "held", "kv", "output", "page_size", "prompt")

    def __init__(
        self,
        kv: int,
        prompt: int,
        generated: int,
        output: int,
        held: int,
        page_size: int,
        finishes: bool,
        decodes: bool,
    ) -> None:
        self.kv = kv
        """Tokens whose KV it holds."""
        self.prompt = prompt
        self.generated = generated
        """Output tokens it has produced, the line's included."""
        self.output = output
        """Output tokens it produces in all."""
        self.held = held
        """Pages its table holds."""
        self.page_size = page_size
        self.finishes = finishes
        """Whether the line finishes it."""
        self.decodes = decodes
        """Whether it produces a token in the line: a chunk short of the prompt's end does not."""
