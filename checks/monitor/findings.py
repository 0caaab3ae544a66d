"""A finding: the evidence that a scheduler under test broke one invariant of the catalogue.

A finding is a verdict on the *target*, never an error of kvsched: invalid input (a malformed
workload or event log) is rejected with an exception instead, and a bug of ours is a crash. A run
has one finding, the first violation: of the earliest iteration with one, the most specific by
:func:`kvsched.spec.invariants.precedence`. What the monitor found checking on after it rides
along as :attr:`Finding.followed_by`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsched.spec.events import IterationEvent
from kvsched.spec.invariants import precedence


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
    followed_by: tuple[Finding, ...] = ()
    """The first violation of each other invariant the monitor found checking on after this one,
    on the same run: later, or in the same iteration and less specific. Each may follow from
    this one (a check that found a violation stops where it found it), so they explain it and
    are never its cause. Without their own ``recent``, nor their own ``followed_by``."""

    def __str__(self) -> str:
        return f"{self.invariant} ({self.where}): {self.message}"

    @property
    def where(self) -> str:
        """When it was found, in words: "iteration 4", or "end of run"."""
        return f"iteration {self.iteration}" if self.iteration else "end of run"


def most_specific(found: Sequence[Finding]) -> Finding:
    """Of violations found in one iteration (or at the run's end), in the order their checks
    ran, the one a verdict names first: the least :func:`~kvsched.spec.invariants.precedence`,
    and of those the first found."""
    return min(found, key=lambda finding: precedence(finding.invariant))


def followed(finding: Finding) -> str:
    """What followed ``finding``, in words: "BATCH-5 in iteration 6, LIVE-1 at the end of the
    run"; empty when nothing did."""
    return ", ".join(
        f"{later.invariant} {'in ' + later.where if later.iteration else 'at the end of the run'}"
        for later in finding.followed_by
    )


def request_list(request_ids: Sequence[str], most: int = 5) -> str:
    """Request ids for a finding's message: the first few, then how many more."""
    shown = ", ".join(repr(rid) for rid in request_ids[:most])
    more = len(request_ids) - most
    return f"{shown} and {more} more" if more > 0 else shown


def page_list(pages: Sequence[int], most: int = 8) -> str:
    """Page ids for a finding's message: the first few, then how many in all."""
    shown = ", ".join(str(p) for p in pages[:most])
    return f"{shown}, ... ({len(pages)} in all)" if len(pages) > most else shown
