"""A workload's requests as flat arrays of integers, for replays of millions of requests.

A :class:`~kvsched.spec.workload.Request` is a Python object of about 300 bytes with its id; a
million of them take most of a large replay's memory. :class:`Columns` holds the three numbers
the reference policies read (spec/semantics.md, section 3) in ``array('q')`` columns, 24 bytes a
request, and the ids as a sequence: the workload's own strings, or :class:`NumberedIds` for a
generated family, whose ids ``r0, r1, ...`` are made only when read. :class:`Waits` is a run's
per-request waits (7.3) over those columns, 8 bytes a request, read as the mapping
:class:`~.metrics.RunMetrics` declares.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from kvsched.spec.vocabulary import PercentileMethod
from kvsched.spec.workload import Limits, Workload


class NumberedIds(Sequence[str]):
    """The ids ``r0 .. r{size - 1}`` of a generated family (reference/families.py)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [f"r{i}" for i in range(self.size)[index]]
        return f"r{range(self.size)[index]}"  # range raises the IndexError a sequence owes

    def __iter__(self) -> Iterator[str]:
        return (f"r{i}" for i in range(self.size))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumberedIds) and other.size == self.size

    def __hash__(self) -> int:
        return hash((NumberedIds, self.size))

    def position(self, request_id: str) -> int:
        """Where ``request_id`` is declared; KeyError if it is none of these ids."""
        digits = request_id[1:]
        # "r01" is not r1: the digits must be the number as it is written.
        number = int(digits) if digits.isdigit() and str(int(digits)) == digits else self.size
        if request_id[:1] == "r" and number < self.size:
            return number
        raise KeyError(request_id)


@dataclass(frozen=True)
class Columns:
    """The requests of a workload in declared order, one array per number (section 1)."""

    name: str
    limits: Limits
    ids: Sequence[str]
    arrival: array[int]
    prompt: array[int]
    output: array[int]
    percentile_method: PercentileMethod

    def __len__(self) -> int:
        return len(self.arrival)

    def arrival_order(self) -> Sequence[int]:
        """Declared positions in the order requests enter the queue (3.1): by arrival, ties in
        declared order. A family is declared in arrival order, which costs nothing here."""
        arrival = self.arrival
        if all(arrival[i] <= arrival[i + 1] for i in range(len(arrival) - 1)):
            return range(len(arrival))
        return array("q", sorted(range(len(arrival)), key=arrival.__getitem__))


def columns_of(workload: Workload) -> Columns:
    """``workload``'s requests as columns; the ids are the requests' own strings."""
    requests = workload.requests
    return Columns(
        name=workload.name,
        limits=workload.limits,
        ids=tuple(r.id for r in requests),
        arrival=array("q", [r.arrival for r in requests]),
        prompt=array("q", [r.prompt_tokens for r in requests]),
        output=array("q", [r.output_tokens for r in requests]),
        percentile_method=workload.percentile_method,
    )


class Waits(Mapping[str, int]):
    """Each request's wait by id, in declared order, over an array of the waits."""

    def __init__(self, ids: Sequence[str], values: array[int]) -> None:
        assert len(ids) == len(values)
        self.ids = ids
        self.array = values
        self._positions: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.array)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __getitem__(self, request_id: str) -> int:
        return self.array[self._position(request_id)]

    def _position(self, request_id: str) -> int:
        if isinstance(self.ids, NumberedIds):
            return self.ids.position(request_id)
        if self._positions is None:  # a lookup by id is rare: the index is built on the first
            self._positions = {rid: i for i, rid in enumerate(self.ids)}
        return self._positions[request_id]

    def pairs(self) -> Iterator[tuple[str, int]]:
        """``items()`` without a lookup per id: for writing a million of them."""
        return zip(self.ids, self.array, strict=True)

    def __repr__(self) -> str:
        return f"Waits({len(self)} requests)"
