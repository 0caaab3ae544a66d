"""The runtime monitor: every applicable invariant, checked on every iteration as the run goes.

It reads :class:`~kvsched.spec.events.IterationEvent` values one at a time and keeps two ledgers
(requests and pages) up to date from what each event names. Every check is registered by step and
catalogue id (:mod:`.registry`; the checks themselves are in :mod:`.checklist` and
:mod:`.checklist_update`), and the monitor (:mod:`.runtime`) runs the registry in the spec's order.
This room needs neither Hypothesis nor Z3, so it can run inside any engine's test suite.
"""

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import Monitor, monitor_run

__all__ = ["Finding", "Monitor", "monitor_run"]
