"""The vLLM recorder: vLLM's own v1 Scheduler, KVCacheManager and BlockPool, on CPU, no model.

The scheduler is vLLM's, unmodified (:mod:`.vllm_engine` builds it): the synchronous
``Scheduler``, which takes in each step's output before it schedules the next; a log cannot yet
say what the ``AsyncScheduler`` does (spec/eventlog.md 4.10). Only the model is faked:
after each ``schedule()`` the step "samples" a token for every request whose computed tokens
reach its prompt and output so far (its own, :func:`~.base.output_token`), and
``update_from_output()`` takes it as a model runner's output. ``max_tokens`` with ``ignore_eos``
ends each request at its output length. With early stops, the requests :func:`~.base.early_end`
picks end sooner through vLLM's own paths: a stop token in ``stop_token_ids`` (``check_stop``),
or ``finish_requests(..., FINISHED_ABORTED)`` between two steps, as an API server aborts a
request whose client left; the abort is written at the end of the iteration before.

What the log says is read from vLLM's state around each call, not from a model of vLLM: the
block ids of each request before and after ``schedule()``, its ``num_computed_tokens`` and status,
the waiting queue's order, ``get_num_free_blocks()``. Preemptions are written first (tail of the
running queue first, as vLLM pops them), with the blocks each held when the step began, then
every running request's new blocks, then the admissions in waiting-queue order. vLLM schedules
its running requests before its waiting ones, and writing a preemption early only frees blocks
sooner, so no block is handed out here before vLLM had it free; what it cannot show is a
block handed out and taken back within one ``schedule()`` (a request preempted after it was given
blocks in the same step), which never reaches a step.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kvsched.checks.eventlog.version2 import (
    Admit,
    Alloc,
    Cache,
    Compute,
    Decode,
    Finish,
    Free,
    Operation,
    Preempt,
    Share,
    Token,
    ids_json,
)
from kvsched.checks.eventlog.writer import LogWriter
from kvsched.checks.record.base import (
    STOP_TOKEN,
    EarlyEnd,
    RecorderError,
    RecordOptions,
    early_end,
    output_token,
    prompt_tokens,
)
from kvsched.checks.record.vllm_engine import block_hasher, build_scheduler, import_vllm
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload, pages_for


def properties(workload: Workload, options: RecordOptions) -> TargetProperties:
    """vLLM v1's design: lazy block allocation under a token budget, chunked prefill (unless
    turned off; capped per request if asked), preemption by recompute, prefix caching with
    reference counts (unless turned off), block 0 the null block, the waiting queue's order
    (fcfs, or priority then arrival), and the options that change what vLLM promises: a prefill
    cadence (no work conservation), a watermark, early stops."""
    if options.prefill_chunk and not options.chunked_prefill:
        raise RecorderError("a prefill chunk caps chunked prefill, which is turned off here")
    return TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=options.token_budget,
        chunked_prefill=options.chunked_prefill,
        prefill_chunk=options.prefill_chunk or None,
        preemption=True,
        prefix_sharing=options.prefix_caching,
        reserved_pages=(0,),
        order="priority" if options.policy == "priority" else None,
        estimate_admission=options.prefill_interval > 1,
        # vLLM's running loop serves the batch first; a prefill cadence leaves chunks out.
        serves_running=options.prefill_interval == 1,
        # vLLM 0.33's v1 scheduler caps no prefills (its SchedulerConfig has no
        # max_num_partial_prefills): its running loop passes a request over only when it has
        # nothing to compute (an encoder or speculative budget, pipeline or asynchronous steps),
        # none of which a recording uses, so every skip with budget left is BATCH-6.
        max_partial_prefills=None,
        stops_early=options.early_stops,
        watermark_pages=int(options.watermark * workload.limits.pool_pages),
    )


def record(workload: Workload, writer: LogWriter, options: RecordOptions) -> None:
    """Drive vLLM's scheduler over ``workload``, writing each iteration to ``writer``."""
    vllm = import_vllm()
    usable = workload.limits.pool_pages - 1
    for request in workload.requests:
        peak = pages_for(request.prompt_tokens + request.output_tokens, workload.limits.page_size)
        if peak > usable:
            raise RecorderError(
                f"request {request.id!r} needs {peak} blocks at its peak, but vLLM keeps block 0 "
                f"of the pool's {workload.limits.pool_pages} as its null block, leaving {usable}; "
                "raise limits.pool_pages"
            )
    try:
        scheduler = build_scheduler(vllm, workload, options)
    except ValueError as error:  # vLLM's configs validate with pydantic (a ValueError)
        reason = str(error).splitlines()
        why = next((line.strip() for line in reason if "error," in line), reason[-1].strip())
        why = why.split(" [type=")[0].removeprefix("Value error, ")
        raise RecorderError(f"vLLM refuses this configuration: {why}") from None
    requests = {r.id: r for r in workload.requests}
    ends = {r.id: end for r in workload.requests if options.early_stops and (end := early_end(r))}
    abort_at: dict[str, int] = {}  # a request to abort, and in which iteration
    arrivals = sorted(workload.requests, key=lambda r: r.arrival)  # stable: ties in order
    bound = options.max_iterations or _bound(workload)
    hasher = block_hasher(vllm, scheduler)
    manager = scheduler.kv_cache_manager
    next_arrival, finished, iteration = 0, 0, 0
    while finished < len(requests) and iteration < bound:
        iteration += 1
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival < iteration:
            request = arrivals[next_arrival]
            # The arrival position as the arrival time: vLLM's priority queue breaks ties of
            # priority by it, as the declared order does (spec/eventlog.md 4.6).
            end = ends.get(request.id)
            stops = end is not None and end[0] == "stop"
            if end is not None and end[0] == "abort":
                abort_at[request.id] = iteration + end[1] - 1
            scheduler.add_request(_vllm_request(vllm, request, hasher, float(next_arrival), stops))
            next_arrival += 1
        running = [r.request_id for r in scheduler.running]
        queue = {rid: i for i, rid in enumerate(_waiting(scheduler))}
        before = {rid: _blocks(manager, rid) for rid in running}
        output = scheduler.schedule()
        ops: list[Operation] = []
        preempted = sorted(output.preempted_req_ids or (), key=running.index, reverse=True)
        for rid in preempted:
            ops += [Preempt(rid), Free(rid, before[rid])]
        scheduled = output.num_scheduled_tokens
        # vLLM schedules the running before the waiting: an admission may hit a block that a
        # running request was given in this very schedule (and computes in this step).
        for rid in scheduled:
            if rid in before:
                grown = _blocks(manager, rid)[len(before[rid]) :]
                if grown:
                    ops.append(Alloc(rid, grown))
        admitted = sorted((rid for rid in scheduled if rid not in before), key=queue.__getitem__)
        hits: dict[str, int] = {}
        for rid in admitted:
            ops.append(Admit(rid))
            blocks = _blocks(manager, rid)
            state = scheduler.requests[rid]
            hits[rid] = state.num_computed_tokens - scheduled[rid]
            shared = blocks[: hits[rid] // workload.limits.page_size]
            if shared:
                ops.append(Share(rid, shared))
            if blocks[len(shared) :]:
                ops.append(Alloc(rid, blocks[len(shared) :]))
        ops += [Cache(rid, hit) for rid, hit in hits.items() if hit]
        tables = {rid: _blocks(manager, rid) for rid in scheduled}
        sampled = [rid for rid in scheduled if _samples(scheduler.requests[rid])]
        # A request that computes one token and samples one decodes: one list for all of them.
        decodes = {rid: None for rid in sampled if scheduled[rid] == 1}
        if decodes:
            ops.append(Decode(ids_json(tuple(decodes))))
        ops += [Compute(rid, n) for rid, n in scheduled.items() if rid not in decodes]
        ops += [Token(rid) for rid in sampled if rid not in decodes]
        tokens = {rid: _token(scheduler.requests[rid], ends.get(rid)) for rid in sampled}
        scheduler.update_from_output(output, _runner_output(vllm, scheduled, tokens))
        done = [rid for rid in scheduled if rid not in scheduler.requests]
        for rid in done:
            abort_at.pop(rid, None)
        done += _abort(vllm, scheduler, abort_at, iteration, tables)
        ops += [Finish(rid) for rid in done]
        ops += [Free(rid, tables[rid]) for rid in done if tables[rid]]
        finished += len(done)
        waiting = _waiting(scheduler)
        writer.iteration(ops, scheduler.kv_cache_manager.block_pool.get_num_free_blocks(), waiting)


def _waiting(scheduler: Any) -> tuple[str, ...]:
    """vLLM's queue in the order it admits from: the waiting requests that hold KV blocks
    (``kv_holding_waiting``, drained first, where this vLLM keeps one), then the rest."""
    holding = getattr(scheduler, "kv_holding_waiting", ())
    return tuple(r.request_id for queue in (holding, scheduler.waiting) for r in queue)


def _token(request: Any, end: EarlyEnd | None) -> int:
    """The token the step samples for ``request``: the stop token at its early stop, if it
    has one, else its own next id."""
    if end == ("stop", request.num_output_tokens + 1):
        return STOP_TOKEN
    return output_token(request.request_id, request.num_tokens)


def _abort(
    vllm: SimpleNamespace,
    scheduler: Any,
    abort_at: dict[str, int],
    iteration: int,
    tables: dict[str, tuple[int, ...]],
) -> list[str]:
    """Abort every request of ``abort_at`` due in ``iteration``, wherever it is (queued,
    running or preempted), as an API server does between two steps; the blocks each held, none
    for a waiting one, go to ``tables``."""
    aborted = [rid for rid, when in abort_at.items() if when == iteration]
    for rid in aborted:
        tables[rid] = _blocks(scheduler.kv_cache_manager, rid)
        del abort_at[rid]
    if aborted:
        scheduler.finish_requests(aborted, vllm.RequestStatus.FINISHED_ABORTED)
    return aborted


def _blocks(manager: Any, rid: str) -> tuple[int, ...]:
    return tuple(manager.get_block_ids(rid)[0])


def _samples(request: Any) -> bool:
    """Whether the step samples a token for ``request``: its KV now covers every token it has."""
    return bool(request.num_computed_tokens >= request.num_tokens)


def _bound(workload: Workload) -> int:
    """Iterations after which a run that has not drained is stopped (LIVE-1 judges it)."""
    tokens = sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
    return max(r.arrival for r in workload.requests) + tokens + len(workload.requests) + 1


def _vllm_request(
    vllm: SimpleNamespace, request: Any, hasher: Any, arrival: float, stops: bool
) -> Any:
    stop = [STOP_TOKEN] if stops else None
    params = vllm.SamplingParams(
        max_tokens=request.output_tokens, ignore_eos=True, stop_token_ids=stop
    )
    return vllm.Request(
        request_id=request.id,
        prompt_token_ids=prompt_tokens(request),
        sampling_params=params,
        pooling_params=None,
        block_hasher=hasher,
        arrival_time=arrival,
        priority=request.priority,
    )


def _runner_output(
    vllm: SimpleNamespace, scheduled: dict[str, int], sampled: dict[str, int]
) -> Any:
    """A model runner's output: the token each request of ``sampled`` produced, none for the
    others (a chunk short of the prompt's end)."""
    ids = list(scheduled)
    return vllm.ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: i for i, rid in enumerate(ids)},
        sampled_token_ids=[[sampled[rid]] if rid in sampled else [] for rid in ids],
    )
