"""Static batching (spec/semantics.md, section 5.1).

A batch keeps its members until the longest finishes; the slots of members that finish earlier
sit idle. Admission opens only when the batch has drained (BATCH-2).
"""

from __future__ import annotations

from .scheduler import ReferenceScheduler


class StaticScheduler(ReferenceScheduler):
    policy = "static"

    def admission_open(self) -> bool:
        return not self.running
