"""A finding: the evidence that a scheduler under test broke one invariant of the catalogue.

A finding is a verdict on the *target*, never an error of kvsched: invalid input (a malformed
workload or event log) is rejected with an exception instead, and a bug of ours is a crash. The
monitor (:mod:`.runtime`) stops at the first finding, so a run has at most one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.events import IterationEvent


@dataclass(frozen=True)
class Finding:
    """Invariant ``invariant`` broke in iteration ``iteration``; ``message`` says how, in words.

    ``requests`` and ``pages`` name the request ids and physical page ids involved, and
    ``recent`` holds the last few (at most 3) iterations up to and including the violation, so
    a reader sees what led to it without rerunning anything. ``iteration`` is 0 for what is
    decided before the first iteration or at the end of the run (a request never finished,
    pages still held once drained, the iteration bound).
    """

    invariant: str
    """Catalogue id from :mod:`kvsched.spec.invariants`, for example ``"PAGE-2"``."""
    iteration: int
    message: str
    requests: tuple[str, ...] = ()
    pages: tuple[int, ...] = ()
    recent: tuple[IterationEvent, ...] = ()

    def __str__(self) -> str:
        where = f"iteration {self.iteration}" if self.iteration else "end of run"
        return f"{self.invariant} ({where}): {self.message}"


def request_list(request_ids: Sequence[str], most: int = 5) -> str:
    """Request ids for a finding's message: the first few, then how many more."""
    shown = ", ".join(repr(rid) for rid in request_ids[:most])
    more = len(request_ids) - most
    return f"{shown} and {more} more" if more > 0 else shown


def page_list(pages: Sequence[int], most: int = 8) -> str:
    """Page ids for a finding's message: the first few, then how many in all."""
    shown = ", ".join(str(p) for p in pages[:most])
    return f"{shown}, ... ({len(pages)} in all)" if len(pages) > most else shown
