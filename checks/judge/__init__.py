"""The judge: combines the monitor, the search, the proofs and the targets into a Report.

- :mod:`.check`: a scheduler or a learner's file, under its policy;
- :mod:`.eventlog`: a recorded event log, offline;
- :mod:`.allocator`: a learner's ``allocate_kv_pages``, called directly.
"""

from kvsched.checks.judge.check import CheckOptions, check_isolated, check_target

__all__ = ["CheckOptions", "check_isolated", "check_target"]
