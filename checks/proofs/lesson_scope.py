"""What the Z3 models cover, and what they refuse (spec/proofs.md).

:mod:`.model` encodes the reference static and continuous schedulers under the lesson model:
FCFS admission against committed peak pages (3.2), one token per active request per iteration,
pages counted, not named (PAGE-2 is outside it), no preemption, chunked prefill, prefix sharing,
reservation ahead of need, reserved page ids or watermark. :mod:`.teaching.model` is narrower
still: closed forms for the teaching trace's shape, nine requests, a batch limit of three, arrivals
in declared order and a pool that never binds. A proof or a cross-check about anything else would
be about a scheduler the model is not, so each model refuses it here, naming what to use instead.
"""

from __future__ import annotations

import heapq

from kvsched.reference.fastpath_scope import REFERENCE_POLICIES, invalid_workload
from kvsched.spec.properties import TargetProperties
from kvsched.spec.scope import COVERED, Scope, beyond_lesson, outside
from kvsched.spec.workload import Workload, arrival_order, peak_pages

MONITOR = "the runtime monitor, kvsched check TARGET (or LOG.jsonl), which applies each declaration"
STEPPED = "the stepped engine, kvsched.reference.engine.run, with the runtime monitor"
TEACHING_REQUESTS = 9
TEACHING_BATCH_LIMIT = 3


def model_scope(properties: TargetProperties) -> Scope:
    """Whether the Z3 model of :mod:`.model` describes a target declaring ``properties``."""
    if properties.policy not in REFERENCE_POLICIES:
        return outside(
            f"policy {properties.policy!r} is not a reference policy (the Z3 model knows "
            f"{' and '.join(REFERENCE_POLICIES)} only)",
            MONITOR,
        )
    departures = beyond_lesson(properties)
    if departures:
        return outside(
            "the Z3 model is the lesson model, and the target declares " + ", ".join(departures),
            MONITOR,
        )
    return COVERED


def workload_scope(workload: Workload) -> Scope:
    """Whether the Z3 model can replay ``workload`` (any workload the loader accepts)."""
    problem = invalid_workload(workload)
    if problem:
        return outside(problem, "fix the workload (spec/semantics.md, section 1)")
    return COVERED


def teaching_scope(workload: Workload, properties: TargetProperties | None = None) -> Scope:
    """Whether the teaching model's closed forms describe ``workload`` exactly."""
    if properties is not None:
        scope = model_scope(properties)
        if not scope.covered:
            return scope
    scope = workload_scope(workload)
    if not scope.covered:
        return scope
    instead = "the Z3 model of kvsched.checks.proofs.model (or " + STEPPED + ")"
    if len(workload.requests) != TEACHING_REQUESTS:
        return outside(
            f"it has {len(workload.requests)} requests; the teaching model has exactly "
            f"{TEACHING_REQUESTS}",
            instead,
        )
    if workload.limits.batch_limit != TEACHING_BATCH_LIMIT:
        return outside(
            f"its batch limit is {workload.limits.batch_limit}; the teaching model's is "
            f"{TEACHING_BATCH_LIMIT}",
            instead,
        )
    if list(workload.requests) != arrival_order(workload.requests):
        return outside("its requests are not declared in arrival order", instead)
    peaks = [peak_pages(r, workload.limits.page_size) for r in workload.requests]
    fullest = sum(heapq.nlargest(TEACHING_BATCH_LIMIT, peaks))
    if fullest > workload.limits.pool_pages:
        return outside(
            f"its pool of {workload.limits.pool_pages} pages can bind (a full batch may need "
            f"{fullest}); the teaching model assumes a pool that never binds",
            instead,
        )
    return COVERED
