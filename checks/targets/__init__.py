"""What ``kvsched check`` judges, and how it is kept at arm's length.

- :mod:`.load`: a scheduler class, a learner's file or an event log, from a TARGET string;
- :mod:`.learner`: a learner's two functions behind the scheduler protocol;
- :mod:`.deadline`: per-call deadlines; :mod:`.isolation`: running a check in a child process.
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
