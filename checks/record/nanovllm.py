"""The nano-vllm recorder: a checkout's own Scheduler, BlockManager and Sequence, no model.

The scheduler is the checkout's, unmodified (:mod:`.nanovllm_engine` loads it). Each iteration
hands it the arrivals as ``Sequence`` objects (the fake prompt of :func:`~.base.prompt_tokens`,
``max_tokens`` the output length, ``ignore_eos``), calls ``schedule()``, "samples" a token for
every sequence of the batch (its own, :func:`~.base.output_token`) and hands them to
``postprocess()``, as nano-vllm's ``LLMEngine.step`` does around its model runner. Both
versions run: the classic (a prompt is prefilled whole) and HEAD (only the first prompt of a
prefill batch may be chunked; its ``postprocess`` takes ``is_prefill``), told apart by that
signature, and each declares what it does.

What the log says is read from nano-vllm's state around each call: every sequence's block table
and ``num_cached_tokens`` before ``schedule()`` and after it, its status, the waiting deque, and
``len(free_block_ids)``. A sequence is active in the log from its first prefill (a chunked one
holds its blocks at the head of ``waiting``, yet computes) until it is preempted or finishes.
Preemptions are written first (in the order nano-vllm made them: a later victim sits nearer the
waiting head), each with the blocks it no longer holds, then the blocks every decoding sequence
gained, then the admissions in batch order with their prefix-cache hits. A block is written
freed only if the sequence's table lost it, and the free count is nano-vllm's own, so a
``deallocate`` that keeps a block shows as PAGE-3, a preemption that keeps its table as PAGE-4.
When nano-vllm raises (an ``assert`` of its own, an index past a free list), the log ends with a
fault line naming the call: a finding (PROTO-1), not a crash of kvsched.
"""

from __future__ import annotations

from pathlib import Path
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
from kvsched.checks.record.base import RecorderError, RecordOptions, output_token, prompt_tokens
from kvsched.checks.record.nanovllm_engine import build_scheduler, check_checkout, load
from kvsched.reference.engine import SchedulerFault
from kvsched.reference.tracebacks import describe_failure
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload, pages_for


def properties(workload: Workload, options: RecordOptions) -> TargetProperties:
    """nano-vllm's design: lazy blocks under ``max_num_batched_tokens``, prefill-only or
    decode-only steps, FCFS with preempted sequences at the head, preemption by recompute of the
    last running sequence, prefix caching by block hash with reference counts, no reserved
    block; the classic prefills prompts whole, HEAD chunks only the first of a batch and
    reserves the blocks of its whole prompt at the first chunk (``reserve_ahead``)."""
    chunked = _engine(workload, options).chunked
    return TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=options.token_budget,
        chunked_prefill=chunked,
        preemption=True,
        prefix_sharing=True,
        order="fcfs",
        chunking="first" if chunked else "none",
        # HEAD takes the blocks of the whole prompt at its first chunk: ahead of need, by design.
        reserve_ahead=chunked,
    )


def record(workload: Workload, writer: LogWriter, options: RecordOptions) -> None:
    """Drive the checkout's scheduler over ``workload``, writing each iteration to ``writer``."""
    engine = _engine(workload, options)
    scheduler = build_scheduler(engine, workload.limits, options.token_budget)
    waiting_status, finished_status = engine.SequenceStatus.WAITING, engine.SequenceStatus.FINISHED
    page_size = workload.limits.page_size
    arrivals = sorted(workload.requests, key=lambda r: r.arrival)  # stable: ties in order
    names: dict[int, str] = {}  # nano-vllm's seq_id -> the workload's request id
    live: dict[str, Any] = {}  # every sequence handed over and not finished
    active: set[str] = set()  # admitted in the log, not since preempted or finished
    bound = options.max_iterations or _bound(workload)
    next_arrival, finished, iteration = 0, 0, 0
    while finished < len(workload.requests) and iteration < bound:
        iteration += 1
        ops: list[Operation] = []
        try:
            while next_arrival < len(arrivals) and arrivals[next_arrival].arrival < iteration:
                request = arrivals[next_arrival]
                params = engine.SamplingParams(max_tokens=request.output_tokens, ignore_eos=True)
                seq = engine.Sequence(prompt_tokens(request), params)
                names[seq.seq_id], live[request.id] = request.id, seq
                scheduler.add(seq)
                next_arrival += 1
        except Exception as error:
            writer.fault(SchedulerFault(iteration, "add", describe_failure(error)))
            return
        if scheduler.is_finished():  # nothing to schedule: nano-vllm's step is never called
            writer.iteration(ops, len(scheduler.block_manager.free_block_ids))
            continue
        held = {rid: tuple(seq.block_table) for rid, seq in live.items()}
        try:
            batch, is_prefill = scheduler.schedule()
        except Exception as error:  # nano-vllm's own failure: a finding, PROTO-1
            writer.fault(SchedulerFault(iteration, "schedule", describe_failure(error)))
            return
        in_batch = {names[seq.seq_id] for seq in batch}
        if len(in_batch) < len(batch):  # a log has no way to run one request twice in a step
            twice = sorted(
                rid for rid in in_batch if sum(names[s.seq_id] == rid for s in batch) > 1
            )
            message = f"schedule() put {', '.join(twice)} in one batch twice"
            writer.fault(SchedulerFault(iteration, "schedule", message))
            return
        queue = [names[seq.seq_id] for seq in scheduler.waiting]
        preempted = [
            rid
            for rid in reversed(queue)
            if rid in active and rid not in in_batch and live[rid].status == waiting_status
        ]
        for rid in preempted:
            active.discard(rid)
            ops.append(Preempt(rid))
            if released := _released(held[rid], live[rid].block_table):
                ops.append(Free(rid, released))
        hits: dict[str, int] = {}
        computed: dict[str, int] = {}
        sampled: list[str] = []
        for seq in batch:
            rid = names[seq.seq_id]
            table = tuple(seq.block_table)
            if rid in active:
                if grown := table[len(held[rid]) :]:
                    ops.append(Alloc(rid, grown))
            else:
                active.add(rid)
                hits[rid] = int(seq.num_cached_tokens)
                ops += _admission(rid, table, hits[rid], page_size)
            computed[rid] = _computed(engine, seq, is_prefill)
            if not is_prefill or not engine.chunked or _prefilled(seq):
                sampled.append(rid)
        ops += [Cache(rid, hit) for rid, hit in hits.items() if hit]
        ops += _step(computed, sampled)
        tables = {names[seq.seq_id]: tuple(seq.block_table) for seq in batch}
        tokens = [output_token(names[seq.seq_id], len(seq)) for seq in batch]
        try:
            if engine.chunked:
                scheduler.postprocess(batch, tokens, is_prefill)
            else:
                scheduler.postprocess(batch, tokens)
        except Exception as error:
            writer.fault(SchedulerFault(iteration, "postprocess", describe_failure(error)))
            return
        for seq in batch:
            rid = names[seq.seq_id]
            if seq.status == finished_status and rid in live:
                del live[rid]
                active.discard(rid)
                finished += 1
                ops.append(Finish(rid))
                if released := _released(tables[rid], seq.block_table):
                    ops.append(Free(rid, released))
        waiting = tuple(names[s.seq_id] for s in scheduler.waiting if names[s.seq_id] not in active)
        writer.iteration(ops, len(scheduler.block_manager.free_block_ids), waiting)


def _admission(rid: str, table: tuple[int, ...], hit: int, page_size: int) -> list[Operation]:
    """A sequence's first prefill: its prefix-cache hits shared, the rest of its table fresh."""
    ops: list[Operation] = [Admit(rid)]
    shared = table[: hit // page_size]
    if shared:
        ops.append(Share(rid, shared))
    if table[len(shared) :]:
        ops.append(Alloc(rid, table[len(shared) :]))
    return ops


def _computed(engine: SimpleNamespace, seq: Any, is_prefill: bool) -> int:
    """The tokens nano-vllm's model runner computes for ``seq`` in this step: HEAD says
    (``num_scheduled_tokens``); the classic prefills all but its cache hits, decodes one."""
    if engine.chunked:
        return int(seq.num_scheduled_tokens)
    return len(seq) - int(seq.num_cached_tokens) if is_prefill else 1


def _prefilled(seq: Any) -> bool:
    """Whether HEAD's prefill chunk reaches the end of the sequence, so the step samples."""
    return bool(seq.num_cached_tokens + seq.num_scheduled_tokens == seq.num_tokens)


def _step(computed: dict[str, int], sampled: list[str]) -> list[Operation]:
    """The step's computes and tokens: one decode list for the sequences that compute one token
    and sample one, a compute and a token for the others. A compute of nothing is not written:
    a full prefix hit that samples anyway is DEC-3's to judge (nano-vllm #144)."""
    decodes = tuple(rid for rid in sampled if computed[rid] == 1)
    ops: list[Operation] = [Decode(ids_json(decodes))] if decodes else []
    ops += [Compute(rid, n) for rid, n in computed.items() if n > 0 and rid not in decodes]
    ops += [Token(rid) for rid in sampled if rid not in decodes]
    return ops


def _released(before: tuple[int, ...], after: list[int]) -> tuple[int, ...]:
    kept = set(after)
    return tuple(block for block in before if block not in kept)


def _engine(workload: Workload, options: RecordOptions) -> SimpleNamespace:
    """The checkout's engine, once the options and the workload are ones nano-vllm can run."""
    if options.source is None:
        raise RecorderError("record nanovllm needs --src CHECKOUT: a clone of nano-vllm")
    refused = [
        (options.policy != "fcfs", "--policy priority (nano-vllm serves first come first)"),
        (bool(options.prefill_chunk), "--prefill-chunk (nano-vllm has no cap on a chunk)"),
        (options.prefill_interval != 1, "--prefill-interval (nano-vllm has no cadence)"),
        (options.watermark > 0, "--watermark (nano-vllm keeps no free share)"),
        (not options.prefix_caching, "--no-prefix-caching (nano-vllm always caches)"),
        (options.early_stops, "--early-stops (nano-vllm has no abort to drive)"),
    ]
    for wrong, what in refused:
        if wrong:
            raise RecorderError(f"nano-vllm has no such setting: {what}")
    check_checkout(Path(options.source))
    _check_fits(workload)
    engine = load(Path(options.source))
    if engine.chunked and not options.chunked_prefill:
        raise RecorderError(
            "this nano-vllm chunks the first prompt of a prefill batch and has no switch to turn "
            "it off: drop --no-chunked-prefill, or record a checkout from before April 2026"
        )
    if not engine.chunked:
        _check_budget(workload, options.token_budget)
    return engine


def _check_fits(workload: Workload) -> None:
    """Refuse a workload nano-vllm cannot drain (it would wait, or assert, forever), or one
    whose batch limit a log cannot yet say nano-vllm's way."""
    limits = workload.limits
    if limits.batch_limit < limits.pool_pages:
        # Each running sequence holds a block, so at pool_pages the per-step cap cannot bind.
        raise RecorderError(
            f"limits.batch_limit is {limits.batch_limit}, below the pool's {limits.pool_pages} "
            "blocks: nano-vllm's max_num_seqs caps the sequences of one step, not those running "
            "(spec/eventlog.md 4.12), and a log cannot say so yet; the two agree only when the "
            f"cap cannot bind: make limits.batch_limit at least {limits.pool_pages}"
        )
    for request in workload.requests:
        tokens = request.prompt_tokens + request.output_tokens
        if request.prompt_tokens < 1:
            raise RecorderError(f"request {request.id!r} has no prompt; nano-vllm needs one")
        if pages_for(tokens, limits.page_size) > limits.pool_pages:
            raise RecorderError(
                f"request {request.id!r} needs {pages_for(tokens, limits.page_size)} blocks at "
                f"its peak, more than the pool's {limits.pool_pages}; raise limits.pool_pages"
            )


def _check_budget(workload: Workload, budget: int) -> None:
    """The classic prefills a preempted sequence whole: its prompt and output but the last."""
    for request in workload.requests:
        tokens = request.prompt_tokens + request.output_tokens
        if tokens - 1 > budget:
            raise RecorderError(
                f"request {request.id!r} may prefill {tokens - 1} tokens at once (its prompt "
                f"and output after a preemption), more than --token-budget {budget}, and this "
                "nano-vllm does not chunk: raise the budget"
            )


def _bound(workload: Workload) -> int:
    """Iterations after which a run that has not drained is stopped (LIVE-1 judges it)."""
    tokens = sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
    return max(r.arrival for r in workload.requests) + tokens + len(workload.requests) + 1
