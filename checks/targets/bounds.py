"""How much a target may answer: one job, to refuse an answer bigger than its workload allows.

An answer costs the target little to make and kvsched much to read: twelve million references to
one string are one tuple in the target and twelve million entries on the wire, decoded, counted
and judged here; a ``generated`` that jumps by 10**8 is one int that kvsched would expand into a
decode list of 10**8 entries. So every answer is held to the most that a scheduler could need
for what kvsched gave it (:class:`SchedulerBounds`: the run's limits and the requests it was
sent; :func:`function_bytes`: the arguments of a learner's function), in two passes, each linear
in the answer's bytes and run before anything is expanded:

1. :func:`check_size`, on the still-encoded payload: at most :meth:`SchedulerBounds.most_bytes`
   bytes, so that decoding it costs at most what the workload allows;
2. :meth:`SchedulerBounds.check`, on the decoded answer, before the engine sees it: no field
   names more entries than there are requests, no page table is longer than the pool, no request
   computes more tokens than it has or decodes more than its output and one more.

Both bounds are far above what a correct scheduler answers, and far enough above a wrong one's
small excess (a request decoded twice, a page handed out twice) that the monitor still names its
invariant; only an answer beyond them is refused, as a PROTO-1 finding whose message says which
field, what bound, and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from kvsched.spec.protocol import ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request

INT_BYTES = 9
"""The most bytes one msgpack int takes (a marker and 8 bytes)."""
HEADER_BYTES = 5
"""The most bytes the header of a msgpack string, array or map takes."""
SLACK_BYTES = 4096
"""Field names, headers and the answer's own envelope, with room to spare."""
TEXT_BYTES = 64 * 1024
"""The most bytes of an answer that is not a value: an exception's names and texts, cut to
wire.TEXT_LIMIT characters by the host, or a refusal."""

_SEQUENCES = ("admitted", "preempted", "waiting", "finished")
_TABLES = ("page_tables", "shared", "preempt_freed", "freed")
_AMOUNTS = ("computed", "cached", "slots")  # slots: a slot id per request (state_slots)
_FIELDS = {"schedule": ScheduledBatch, "update_from_output": StepOutcome}
_PARTS = msgspec.msgpack.Decoder(dict[str, msgspec.Raw])


class BoundError(Exception):
    """An answer over its bound; the text says which part, what bound and why."""


Why = str | Callable[[], str]
"""Why an answer may hold as many bytes as its bound: the words, or what makes them. An answer is
measured against its bound every call, a learner's every iteration, and formatting the words
each time was about half of the 1.9 to 2.2 microseconds a learner's bound took (``timeit``):
they are made only for an answer over its bound."""


def check_size(raw: msgspec.Raw, most: int, why: Why) -> None:
    """BoundError if the encoded answer ``raw`` is over ``most`` bytes; ``why`` says whence."""
    size = len(raw)
    if size <= most:
        return
    if callable(why):
        why = why()
    raise BoundError(
        f"an answer of {size:,} bytes, more than the {most:,} that {why}{_largest(raw)}; "
        "kvsched reads no answer over its workload's bound, so that an answer cheap to make "
        "cannot make the check work without end"
    )


def _largest(raw: msgspec.Raw) -> str:
    """Which part of a map-shaped answer is the biggest, to point at the field at fault."""
    try:
        parts = _PARTS.decode(raw)  # each value's bytes are skipped in C, not decoded
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return ""
    if not parts:
        return ""
    name, part = max(parts.items(), key=lambda item: len(item[1]))
    return f" (its field '{name[:80]}' alone is {len(part):,} bytes)"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def function_bytes(sent: int, arguments: Sequence[Any]) -> tuple[int, Why]:
    """The most bytes a learner's function may answer a call of ``sent`` bytes with, and why.

    ``schedule_iteration`` returns the state it was given, changed: the same requests, each page
    moved from the free list to a request or back, counters grown. Twice the call's bytes, plus
    every page of the pool listed once more and some slack, is far above that.
    """
    pool = 0
    if len(arguments) > 1 and isinstance(arguments[1], Mapping):
        given = arguments[1].get("pool_pages", 0)
        pool = given if isinstance(given, int) else 0

    def why() -> str:
        return (
            f"a learner's state can need after a call of {sent:,} bytes (twice the state it "
            f"was given, plus each of the pool's {_count(pool, 'page')} once more)"
        )

    return 2 * sent + INT_BYTES * pool + SLACK_BYTES, why


class SchedulerBounds:
    """The most one scheduler's answers may hold, by its limits and the requests it was sent."""

    def __init__(self, limits: Limits) -> None:
        self.pool = limits.pool_pages
        self.outputs: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        self._id_bytes = 0
        self._decode_bytes = 0
        self._most_output = self._most_tokens = 0

    def add(self, request: Request) -> None:
        """``request`` was sent to the scheduler: its answers may name it from now on."""
        if request.id in self.outputs:
            return
        size = len(msgspec.msgpack.encode(request.id))
        self.outputs[request.id] = request.output_tokens
        self.tokens[request.id] = request.prompt_tokens + request.output_tokens
        self._id_bytes += size
        self._decode_bytes += (request.output_tokens + 1) * size
        self._most_output = max(self._most_output, request.output_tokens)
        self._most_tokens = max(self._most_tokens, request.prompt_tokens + request.output_tokens)

    def most_bytes(self, method: str) -> int:
        """The largest encoded answer to ``method`` the requests sent so far can need."""
        count, ids = len(self.outputs), self._id_bytes + HEADER_BYTES
        table = ids + count * (HEADER_BYTES + INT_BYTES * self.pool)
        if method == "schedule":
            amounts = ids + count * INT_BYTES
            return 3 * ids + self._decode_bytes + 3 * table + 3 * amounts + SLACK_BYTES
        if method == "update_from_output":
            return ids + table + ids + count * INT_BYTES + SLACK_BYTES
        return SLACK_BYTES

    def budget(self, method: str) -> Callable[[int, int], tuple[int, Why]]:
        """For remote.RemoteTarget: the most bytes of an answer to ``method``, and why."""
        return lambda _sent, _size: (self.most_bytes(method), self.why)

    def why(self) -> str:
        return (
            f"a scheduler can need for the {_count(len(self.outputs), 'request')} it was sent "
            f"and a pool of {_count(self.pool, 'page')} (each field naming each request once, "
            "each page table the whole pool, each request decoding its whole output)"
        )

    def check(self, method: str, answer: Any) -> None:
        """BoundError if ``answer`` to ``method`` holds more than the workload allows."""
        kind = _FIELDS.get(method)
        if kind is None or not isinstance(answer, kind):
            return
        name = kind.__name__
        count = len(self.outputs)
        for field in _SEQUENCES:
            entries = getattr(answer, field, None)
            if entries is not None and len(entries) > count:
                raise BoundError(
                    f"{name}.{field} lists {len(entries):,} requests, more than the {count} this "
                    f"scheduler was sent; each request is listed at most once"
                )
        for field in (*_TABLES, *_AMOUNTS):
            mapping = getattr(answer, field, None)
            if mapping is not None and len(mapping) > count:
                raise BoundError(
                    f"{name}.{field} has {len(mapping):,} entries, more than the {count} "
                    "requests this scheduler was sent; it maps each request at most once"
                )
        for field in _TABLES:
            self._check_tables(name, field, getattr(answer, field, None))
        if isinstance(answer, ScheduledBatch):
            self._check_decode(answer.decode)
            for field in _AMOUNTS:
                self._check_amounts(field, getattr(answer, field))

    def _check_tables(self, name: str, field: str, tables: Mapping[str, Any] | None) -> None:
        for rid, pages in (tables or {}).items():
            if len(pages) > self.pool:
                raise BoundError(
                    f"{name}.{field}[{rid[:80]!r}] lists {len(pages):,} pages, more than the "
                    f"pool's {self.pool}; a request holds distinct pages of the pool, so its "
                    "table is never longer than the pool"
                )

    def _check_decode(self, decode: Sequence[str]) -> None:
        for rid, entries in Counter(decode).items():
            output = self.outputs.get(rid, self._most_output)
            if entries > output + 1:
                raise BoundError(
                    f"ScheduledBatch.decode lists request {rid[:80]!r} {entries:,} times, one "
                    f"token each, more than its whole output of {output} tokens and one more; a "
                    "request produces at most one token per iteration (DEC-1), and kvsched does "
                    "not count a jump past its whole output"
                )

    def _check_amounts(self, field: str, amounts: Mapping[str, int] | None) -> None:
        for rid, amount in (amounts or {}).items():
            most = self.tokens.get(rid, self._most_tokens)
            if amount > most:
                raise BoundError(
                    f"ScheduledBatch.{field}[{rid[:80]!r}] is {amount:,} tokens, more than the "
                    f"{most} the request has in all (its prompt plus its output); no iteration "
                    "computes or reuses KV for tokens a request does not have"
                )
