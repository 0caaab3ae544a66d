"""What ``kvsched check`` judges, and how it is kept at arm's length.

- :mod:`.load`: a scheduler class, a learner's file or an event log, from a TARGET string;
- :mod:`.learner`: a learner's two functions behind the scheduler protocol;
- :mod:`.host`, :mod:`.process`, :mod:`.wire`, :mod:`.remote`: the target in a process of its own,
  behind a wire of plain data, seen from kvsched as proxies of a scheduler or learner's file,
  under the limits of :mod:`.confinement`;
- :mod:`.deadline`: per-call deadlines for a target trusted to run in kvsched's own process.
"""

from kvsched.checks.targets.load import (
    EventLogTarget,
    LearnerTarget,
    SchedulerTarget,
    Target,
    TargetError,
    load_target,
)

__all__ = [
    "EventLogTarget",
    "LearnerTarget",
    "SchedulerTarget",
    "Target",
    "TargetError",
    "load_target",
]
