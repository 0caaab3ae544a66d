"""Judging a target that runs in its own process: the way ``kvsched check`` and the plugin judge.

kvsched never imports the target. The :class:`~.door.Door` loads it in a host process under a
:class:`~kvsched.checks.targets.confinement.Confinement`, and :func:`~.check.check_target` judges
the proxies it hands back, here, with the engine, the monitor and Hypothesis of this process. If
the host dies, hangs, writes too much or garbles the wire, or the overall budget runs out, the
check stops with a PROTO-1 verdict that says what happened during which call and shows the end
of the target's output. Every report states the limits the target ran under.
"""

from __future__ import annotations

import time

from kvsched.checks.judge.door import Door
from kvsched.checks.judge.target import CheckOptions, check_target, hosted_in, hosted_notes
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.process import BudgetSpent, HostFailure
from kvsched.checks.targets.remote import HostDeadline
from kvsched.checks.verdict.report import Evidence, Report, build_verdict


def check_hosted(spec: str, options: CheckOptions, confinement: Confinement) -> Report:
    """Judge TARGET ``spec`` in a host process; TargetError if it cannot be loaded (exit 2)."""
    with Door(spec, confinement) as door:
        return judge(door, options)


def judge(door: Door, options: CheckOptions) -> Report:
    """Judge the target at ``door``, loaded now unless it already is; TargetError if it cannot
    be loaded (exit 2). A log, and a target trusted into this process, are judged as they are.
    The report is built once, with the time since the load began (starting the host and
    importing the target count too) and the limits the target ran under."""
    if door.kind == "event log" or door.confinement is None:
        return check_target(door.load(options), options)
    host = door.confinement
    policy = options.policy
    try:
        target = door.load(options)
        assert door.remote is not None  # a hosted target has its host
        policy = options.policy or getattr(target, "policy", "")
        deadline = HostDeadline(door.remote)
        report = check_target(target, options, deadline, door.modelled, host, door.started)
        door.remote.finish()  # a frame nobody asked for, sent after the last answer, is a finding
        return report
    except BudgetSpent as spent:
        # The overall budget ended the check while the target ran: too little was judged for
        # a pass, and running out of time is not a violation of the target's.
        verdict = build_verdict(
            door.spec, door.kind, policy, Evidence(), None, exercised=frozenset(),
            inconclusive=(str(spent),),
        )  # fmt: skip
    except HostFailure as failure:
        finding = Finding(invariant="PROTO-1", iteration=0, message=str(failure))
        verdict = build_verdict(door.spec, door.kind, policy, Evidence(watchdog=True), finding)
    seconds = time.monotonic() - door.started
    notes, sandbox = hosted_notes(host), hosted_in(host)
    return Report(door.spec, (verdict,), seconds=seconds, notes=notes, sandbox=sandbox)
