"""What the engine scheduler's batched replay (:mod:`.engine_fastpath`) covers.

The replay keeps the requests past their prefill as sums (spec/semantics.md, 7.5 and 7.6) and
handles only the one request that may be part way through a chunked prefill and the admissions,
one by one. That is exact while every decoding request gets its token in every decode iteration
and no page is shared or taken back:

- FCFS order, so the waiting queue is a range of the arrival order;
- no prefix hit: prefix caching off, or no request with a shared prefix of a full page (1.1);
- every request fits the usable pool (the null page aside), and under whole prompts, the token
  budget; else the stepped engine would wait on it forever, or thrash.

What it cannot see up front it meets as it goes and then hands the whole run to the stepped
engine (:func:`.engine_fastpath.engine_metrics`): a preemption (the pool binds on running
requests), a decode batch larger than the token budget, a second chunked prefill beside one
(prefill-first leaves a chunk's last token to a decode batch), a run the stepped engine's
iteration bound would stop. Those depend on the run, not on the configuration alone.
"""

from __future__ import annotations

from kvsched.spec.scope import COVERED, Scope, outside
from kvsched.spec.workload import Workload, pages_for

from .engine_scheduler.config import EngineConfig
from .fastpath_scope import invalid_workload

STEPPED = "the stepped engine, kvsched.reference.engine.run with the engine scheduler"


def engine_replay_scope(workload: Workload, config: EngineConfig) -> Scope:
    """Whether :func:`.engine_fastpath.engine_replay` models ``config`` on ``workload``."""
    problem = invalid_workload(workload)
    if problem:
        return outside(problem, "fix the workload (spec/semantics.md, section 1)")
    if config.state_slots is not None:
        return outside("state slots: admission waits for a free slot", STEPPED)
    if config.order != "fcfs":
        return outside(f"admission order {config.order!r}: the queue is re-sorted", STEPPED)
    limits, requests = workload.limits, workload.requests
    if config.prefix_caching and any(
        r.prefix_group and r.prefix_tokens >= limits.page_size for r in requests
    ):
        return outside("prefix caching with shared prefixes of a full page: hits", STEPPED)
    usable = limits.pool_pages - (1 if config.null_page else 0)
    largest = max(pages_for(r.prompt_tokens + r.output_tokens, limits.page_size) for r in requests)
    if largest > usable:
        return outside(f"a request needs {largest} pages, the pool has {usable} usable", STEPPED)
    budget = config.token_budget
    if config.chunking == "none" and budget is not None:
        longest = max(max(r.prompt_tokens, 1) for r in requests)
        if longest > budget:
            return outside(f"a whole prompt of {longest} tokens over a budget of {budget}", STEPPED)
    return COVERED
