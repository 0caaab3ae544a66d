"""Continuous batching (spec/semantics.md, section 5.2).

Membership is re-decided before every iteration: pages freed at the end of one iteration are
allocatable in the next, and the head of the queue joins whenever a slot and its pages are free
(BATCH-3).
"""

from __future__ import annotations

from .scheduler import ReferenceScheduler


class ContinuousScheduler(ReferenceScheduler):
    policy = "continuous"

    def admission_open(self) -> bool:
        return True
