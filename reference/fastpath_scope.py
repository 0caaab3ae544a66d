"""What the event-jumping replay (:mod:`.fastpath`) covers, and what it refuses.

The replay jumps between admissions and completions using closed forms that hold for the reference
static and continuous schedulers under the lesson model (spec/semantics.md, sections 3 and 5): one
token per active request per iteration, FCFS admission against committed peak pages, no
preemption, no chunked prefill, no prefix sharing, every pool page usable. Anything else (another
policy, a target declaring an engine feature, a workload the loader would refuse) is out of its
scope: the stepped engine (:func:`.engine.run`) runs it instead, one iteration at a time.
"""

from __future__ import annotations

from kvsched.spec.properties import TargetProperties
from kvsched.spec.scope import COVERED, Scope, beyond_lesson, outside
from kvsched.spec.vocabulary import POLICY_NAMES
from kvsched.spec.workload import Workload, pages_for

REFERENCE_POLICIES = POLICY_NAMES
STEPPED = "the stepped engine, kvsched.reference.engine.run, which runs any scheduler"


def replay_scope(
    workload: Workload, policy: str, properties: TargetProperties | None = None
) -> Scope:
    """Whether :func:`.fastpath.replay` gives exactly the stepped engine's results here."""
    scope = policy_scope(policy, properties)
    if not scope.covered:
        return scope
    problem = invalid_workload(workload)
    if problem:
        return outside(problem, "fix the workload (spec/semantics.md, section 1)")
    return COVERED


def policy_scope(policy: str, properties: TargetProperties | None = None) -> Scope:
    """Whether the replay models ``policy`` for a target declaring ``properties``."""
    if policy not in REFERENCE_POLICIES:
        return outside(
            f"policy {policy!r} is not a reference policy (the replay knows "
            f"{' and '.join(REFERENCE_POLICIES)} only)",
            STEPPED,
        )
    if properties is not None and properties.policy not in ("", policy):
        return outside(f"the target declares policy {properties.policy!r}, not {policy!r}", STEPPED)
    departures = beyond_lesson(properties) if properties is not None else ()
    if departures:
        return outside(
            "the replay models the lesson model only, and the target declares "
            + ", ".join(departures),
            STEPPED + "; for a recorded log, kvsched check LOG.jsonl",
        )
    return COVERED


def invalid_workload(workload: Workload) -> str:
    """Why the workload loader (section 1) would refuse ``workload``, or "" if it would not."""
    limits = workload.limits
    requests = workload.requests
    if min(limits.batch_limit, limits.page_size, limits.pool_pages) < 1:
        return f"{workload.name}: limits must be positive, got {limits}"
    if not requests:
        return f"{workload.name}: no requests; a workload needs a request"
    # Whole-workload passes first, cheap on a large workload; the request loop below runs only
    # when one of them fails, to name the request.
    page_size = limits.page_size
    capacity = limits.pool_pages * page_size  # tokens <= capacity iff their pages fit the pool
    if (
        len({r.id for r in requests}) == len(requests)
        and min(r.arrival for r in requests) >= 0
        and min(r.prompt_tokens for r in requests) >= 0
        and min(r.output_tokens for r in requests) >= 1
        and max(r.prompt_tokens + r.output_tokens for r in requests) <= capacity
    ):
        return ""
    seen: set[str] = set()
    for index, request in enumerate(requests):
        where = f"{workload.name}: request #{index} ('{request.id}')"
        if request.id in seen:
            return f"{where}: duplicate request id"
        seen.add(request.id)
        if request.arrival < 0 or request.prompt_tokens < 0 or request.output_tokens < 1:
            return f"{where}: needs arrival >= 0, prompt_tokens >= 0 and output_tokens >= 1"
        peak = pages_for(request.prompt_tokens + request.output_tokens, page_size)
        if peak > limits.pool_pages:
            return (
                f"{where}: needs {peak} pages at its peak but limits.pool_pages is "
                f"{limits.pool_pages}; it could never be admitted"
            )
    raise AssertionError("a whole-workload check failed, but no request breaks it")
