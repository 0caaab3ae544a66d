"""The judge: combines the monitor, the search, the proofs and the targets into a Report.

- :mod:`.door`: the one door every path that hosts or judges a target comes in by (``check``,
  the pytest plugin, ``sweep``, ``report --policies``): the target's kind read once, the target
  loaded once, and a run judged by the engine and the monitor;
- :mod:`.hosted`: a target in a process of its own, the way ``kvsched check`` judges;
- :mod:`.check`: a scheduler or a learner's file, under its policy;
- :mod:`.eventlog`: a recorded event log, offline;
- :mod:`.allocator`: a learner's ``allocate_kv_pages``, called directly;
- :mod:`.proved`: what Z3 proved of a reference design, proved once and cited from the cache.

Each verdict is built once, from everything its check collected (findings, coverage, the
allocator's calls, the proofs): nothing amends it afterwards.
"""

from kvsched.checks.judge.hosted import check_hosted
from kvsched.checks.judge.target import CheckOptions, check_target

__all__ = ["CheckOptions", "check_hosted", "check_target"]
