"""Judging a target that runs in its own process: the way ``kvsched check`` and the plugin judge.

kvsched never imports the target. :class:`~kvsched.checks.targets.remote.RemoteTarget` loads it
in a host process under a :class:`~kvsched.checks.targets.confinement.Confinement`, and
:func:`~.check.check_target` judges the proxies it hands back, here, with the engine, the
monitor and Hypothesis of this process. If the host dies, hangs, writes too much or garbles the
wire, or the overall budget runs out, the check stops with a PROTO-1 verdict that says what
happened during which call and shows the end of the target's output. Every report states the
limits the target ran under.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import replace

from kvsched.checks.judge.check import CheckOptions, check_target
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.proofs.evidence import modelled_policy
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.load import (
    EventLogTarget,
    Target,
    is_event_log,
    load_target,
)
from kvsched.checks.targets.process import BudgetSpent, HostFailure
from kvsched.checks.targets.remote import HostDeadline, RemoteTarget
from kvsched.checks.targets.source import target_kind
from kvsched.checks.verdict.report import Evidence, Report, build_verdict


def check_hosted(spec: str, options: CheckOptions, confinement: Confinement) -> Report:
    """Judge TARGET ``spec`` in a host process; TargetError (exit 2) if it cannot be loaded."""
    started = time.monotonic()
    if is_event_log(spec):  # a log runs no code of the target's
        target: Target = load_target(spec)
        assert isinstance(target, EventLogTarget)
        return check_target(target, options)
    modelled = reference_policy(spec)
    kind = target_kind(spec)
    preload(options, modelled, kind)
    remote = RemoteTarget(spec, confinement)
    policy = options.policy
    try:
        target = remote.load()
        policy = options.policy or getattr(target, "policy", "")
        deadline = HostDeadline(remote)
        report = check_target(target, options, deadline, modelled)
        remote.finish()  # a frame nobody asked for, sent after the last answer, is a finding
    except BudgetSpent as spent:
        # The overall budget ended the check while the target ran: too little was judged for
        # a pass, and running out of time is not a violation of the target's.
        verdict = build_verdict(
            spec, kind, policy, Evidence(), None, exercised=frozenset(), inconclusive=(str(spent),)
        )
        report = Report(spec, (verdict,), seconds=time.monotonic() - started)
    except HostFailure as failure:
        finding = Finding(invariant="PROTO-1", iteration=0, message=str(failure))
        verdict = build_verdict(spec, kind, policy, Evidence(watchdog=True), finding)
        report = Report(spec, (verdict,), seconds=time.monotonic() - started)
    finally:
        remote.close()
    seconds = time.monotonic() - started  # starting the host and importing the target count too
    contained = confinement.containment()
    notes = (*report.notes, confinement.describe())
    sandbox = (contained.kind, contained.reason)
    return replace(report, seconds=seconds, notes=notes, sandbox=sandbox)


SEARCH = (
    "kvsched.checks.search.counterexample",
    "kvsched.checks.search.explore",
    "kvsched.checks.search.shrink",
    "kvsched.checks.search.stateful",
    "kvsched.checks.search.strategies",
    "hypothesis.internal.conjecture.optimiser",  # imported by hypothesis.target() on first use
)
"""What the search imports, Hypothesis with it."""
PROOFS = (
    "kvsched.checks.proofs.catalogue",
    "kvsched.checks.proofs.induction",
    "kvsched.checks.proofs.model",
    "kvsched.checks.proofs.query",
)
"""What citing the reference's proofs imports, Z3 with it."""
ALLOCATOR = ("kvsched.checks.judge.allocator",)
"""What checking a learner's ``allocate_kv_pages`` imports, Hypothesis with it."""


def preload(options: CheckOptions, modelled: str, kind: str) -> None:
    """Import now what the check will import later: once the target runs, it may have written
    files, and kvsched imports nothing after that (tests/attacks/test_attack_containment.py
    checks that none is imported late)."""
    needed = (
        *(SEARCH if options.hypothesis else ()),
        *(PROOFS if modelled else ()),
        *(ALLOCATOR if kind == "learner" else ()),
    )
    for module in needed:
        importlib.import_module(module)


def reference_policy(spec: str) -> str:
    """The policy of the reference scheduler ``spec`` names, or "" if it names another target.

    Only the reference classes have Z3 models. They are kvsched's own code, found here by name
    under the installed ``kvsched`` package (which a module of the target's cannot shadow, as
    ``kvsched`` is already imported), so importing them does not import the target.
    """
    module, _, attribute = spec.partition(":")
    if not module.startswith("kvsched.") or not attribute or module.endswith(".py"):
        return ""
    if not all(part.isidentifier() for part in (*module.split("."), *attribute.split("."))):
        return ""
    try:
        found: object = importlib.import_module(module)
    except ImportError:
        return ""
    for part in attribute.split("."):
        found = getattr(found, part, None)
    return modelled_policy(found)  # type: ignore[arg-type]
