"""The SGLang recorder: SGLang's own scheduling pieces, radix cache and page allocator, no model.

SGLang's ``Scheduler`` is built by its server around a model runner, so the recorder drives the
pieces its event loop calls (:mod:`.sglang_engine` builds them), in the order
``Scheduler.event_loop_normal`` calls them, without overlap, speculation or mixed chunks (the
defaults on a CPU). Each iteration:

1. the arrivals join the waiting queue (``Req``, ``SamplingParams`` with ``max_new_tokens``
   the output length and ``ignore_eos``), each stamped as ``_add_request_to_queue`` stamps it;
2. ``get_next_batch_to_run``: a chunked request in flight is checkpointed into the tree
   (``checkpoint_kv_cache``, as ``stash_chunked_request`` does); the last prefill batch, less the
   chunked request, is merged into the running batch (``ScheduleBatch.filter_batch`` and
   ``merge_batch``); the queue is ordered (``SchedulePolicy.calc_priority``) and a
   ``PrefillAdder`` takes the chunked request (``add_chunked_req``) then the queue's requests in
   order (``Req.init_next_round_input``, which matches the prefix in the ``RadixCache``, and
   ``add_one_req``) until one does not fit; the admitted become a batch
   (``ScheduleBatch.init_new`` and ``prepare_for_extend``, which allocate their pages). With no
   prefill, the running batch decodes: ``check_decode_mem``, ``retract_decode`` when the pool
   is short (the retracted requests rejoin the queue at its tail, as
   ``_add_request_to_queue`` puts them), ``prepare_for_decode``;
3. the step "samples" a token for every request of the batch but a chunk short of its prompt's
   end (its own, :func:`~.base.output_token`), and the result is taken as
   ``process_batch_result_prefill`` and ``_decode`` take it: ``output_ids``,
   ``Req.update_finish_state``, then ``release_kv_cache`` for a finished request or
   ``checkpoint_kv_cache`` for one whose prefill ended.

The admission loop and the choice between prefill and decode are written here, after SGLang's;
what they call, which decides what is admitted, what it is given and what is retracted, is
SGLang's code. What the log says is read from SGLang's state around each call: each request's
row of ``ReqToTokenPool`` (its token slots, ``kv.kv_allocated_len`` of them, as pages), its
prefix match (``prefix_indices``), the waiting queue's order, and the free pages: the
allocator's free pages plus the tree's evictable ones (cached, held by no request), as vLLM
counts its cached free blocks. So a page SGLang loses (a retraction or a finish that does not
give its pages back, a tree node whose lock is never released) shows as PAGE-3.

With early stops, the requests :func:`~.base.early_end` picks end through SGLang's paths: a stop
token in ``stop_token_ids``, or an abort as ``Scheduler.abort_request`` makes it: a queued request
leaves the queue, a running one is marked ``to_finish`` and ends at its next step. A chunked
prefill's abort waits for its prefill to end (``abort_request`` defers it too).

What a log cannot say ends the recording with a :class:`RecorderError`: SGLang's tree replacing
pages a request computed with a copy it already holds (two requests that computed the same
prefix side by side) changes a table in its middle, which a version-2 log cannot express.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
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
from kvsched.checks.record.sglang_engine import build_pieces, import_sglang, publish_config
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload, pages_for


def properties(workload: Workload, options: RecordOptions) -> TargetProperties:
    """SGLang's design: pages taken as tokens are computed, admission by an estimate of the
    running requests' future tokens (``new_token_ratio``: no work conservation promised), a
    prefill budget and chunk of ``token_budget`` tokens where only one request of a batch is
    chunked, retraction by recompute, prefix sharing through the radix tree (unless turned
    off), page 0 kept as padding, the queue's order, and early stops."""
    _refuse(options)
    return TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=options.token_budget,
        chunked_prefill=options.chunked_prefill,
        chunking="first" if options.chunked_prefill else "none",
        preemption=True,
        prefix_sharing=options.prefix_caching,
        reserved_pages=(0,),
        order="priority" if options.policy == "priority" else "fcfs",
        requeue="tail",  # a retracted request rejoins the queue behind it
        estimate_admission=True,
        stops_early=options.early_stops,
    )


@dataclass
class _Run:
    """SGLang's scheduler state between two iterations, and what the log has said of it."""

    sglang: SimpleNamespace
    pieces: SimpleNamespace
    page_size: int
    budget: int
    batch_limit: int
    chunked: bool
    waiting: list[Any] = field(default_factory=list)
    running: Any = None
    last_batch: Any = None
    chunked_req: Any = None
    active: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Requests admitted in the log, not since retracted or finished, with their tables."""


def record(workload: Workload, writer: LogWriter, options: RecordOptions) -> None:
    """Drive SGLang's scheduling pieces over ``workload``, writing each iteration to ``writer``."""
    _refuse(options)
    sglang = import_sglang()
    limits = workload.limits
    _check_fits(workload, sglang.clip_new_tokens)
    if limits.batch_limit > options.token_budget:
        raise RecorderError(
            f"limits.batch_limit {limits.batch_limit} is above --token-budget "
            f"{options.token_budget}: SGLang's decode step is not bound by its prefill budget, "
            "so a full batch would compute more tokens than the log declares; raise the budget"
        )
    if not options.chunked_prefill:
        _check_budget(workload, options.token_budget)
    longest = max(r.prompt_tokens + r.output_tokens for r in workload.requests)
    override = publish_config(sglang, limits.page_size, options.policy == "priority")
    try:
        pieces = build_pieces(
            sglang,
            limits.pool_pages,
            limits.page_size,
            limits.batch_limit,
            longest + limits.page_size,
            prefix_caching=options.prefix_caching,
            priority=options.policy == "priority",
        )
        run = _Run(
            sglang,
            pieces,
            limits.page_size,
            options.token_budget,
            limits.batch_limit,
            options.chunked_prefill,
        )
        run.running = sglang.ScheduleBatch(reqs=[], batch_is_full=False)
        _loop(run, workload, writer, options)
    finally:
        override.restore()


def _loop(run: _Run, workload: Workload, writer: LogWriter, options: RecordOptions) -> None:
    sglang = run.sglang
    ends = {r.id: end for r in workload.requests if options.early_stops and (end := early_end(r))}
    abort_at: dict[str, int] = {}
    reqs: dict[str, Any] = {}
    arrivals = sorted(workload.requests, key=lambda r: r.arrival)  # stable: ties in order
    bound = options.max_iterations or _bound(workload)
    next_arrival, finished, iteration = 0, 0, 0
    while finished < len(workload.requests) and iteration < bound:
        iteration += 1
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival < iteration:
            request = arrivals[next_arrival]
            end = ends.get(request.id)
            if end is not None and end[0] == "abort":
                abort_at[request.id] = iteration + end[1] - 1
            stop = [STOP_TOKEN] if end is not None and end[0] == "stop" else None
            params = sglang.SamplingParams(
                max_new_tokens=request.output_tokens, stop_token_ids=stop
            )
            params.normalize(None)
            req = sglang.Req(
                request.id,
                "",
                array("q", prompt_tokens(request)),
                params,
                priority=request.priority,
            )
            reqs[request.id] = req
            _enqueue(run, req)
            next_arrival += 1
        ops: list[Operation] = []
        batch, retracted = _next_batch(run)
        for req in retracted:
            ops += [Preempt(req.rid), *_frees(req.rid, run.active.pop(req.rid), _table(run, req))]
        if batch is not None:
            ops += _schedule_ops(run, batch)
            ops += _step_ops(run, batch)
            done = _take_result(run, batch, ends)
        else:
            done = []
        done += _abort(run, reqs, abort_at, iteration)
        for req in done:
            table = run.active.pop(req.rid, ())
            ops.append(Finish(req.rid))
            ops += _frees(req.rid, table, ())
        finished += len(done)
        run.last_batch = batch
        free = run.pieces.allocator.available_size() + run.pieces.tree.evictable_size()
        writer.iteration(ops, free // run.page_size, tuple(r.rid for r in run.waiting))


def _enqueue(run: _Run, req: Any) -> None:
    """``Scheduler._add_request_to_queue``: the tail of the queue, stamped for the policy."""
    run.waiting.append(req)
    req.time_stats.set_wait_queue_entry_time()


def _next_batch(run: _Run) -> tuple[Any, list[Any]]:
    """``Scheduler.get_next_batch_to_run`` (no overlap, speculation or mixed chunk): the batch
    to run, if any, and the requests retracted for it."""
    sglang, pieces = run.sglang, run.pieces
    exclude = []
    if run.chunked_req is not None:
        exclude.append(run.chunked_req)
        if run.chunked_req.extend_end > run.chunked_req.prefix_len:
            sglang.checkpoint_kv_cache(run.chunked_req, pieces.tree)
            _check_table(run, run.chunked_req)
    running = run.running
    last = run.last_batch
    if last is not None and last.forward_mode.is_extend():
        size = last.batch_size()
        last.filter_batch(reqs_to_exclude=exclude)
        if last.batch_size() < size:
            running.batch_is_full = False
        if not last.is_empty() and last is not running:
            if running.is_empty():
                running = last
            else:
                running.merge_batch(last)
    size = running.batch_size()
    running.filter_batch()
    if running.batch_size() < size:
        running.batch_is_full = False
    run.running = running
    batch = _prefill(run)
    if batch is not None:
        return batch, []
    if running.is_empty():
        return None, []
    retracted: list[Any] = []
    if not running.check_decode_mem():
        retracted, ratio, aborted = running.retract_decode()
        if aborted:
            names = ", ".join(r.rid for r in aborted)
            raise RecorderError(
                f"SGLang aborted {names}: out of pages even after retracting the rest of the "
                "batch; the pool is too small for this workload (raise limits.pool_pages)"
            )
        pieces.ratio.current = ratio
        for req in retracted:
            _enqueue(run, req)
    else:
        pieces.ratio.decay_step()
    if running.is_empty():
        return None, retracted
    running.prepare_for_decode()
    return running, retracted


def _prefill(run: _Run) -> Any:
    """``Scheduler._get_new_batch_prefill_raw``: a prefill batch, or None."""
    sglang, pieces, running = run.sglang, run.pieces, run.running
    if running.is_empty():
        running.batch_is_full = False
    if (running.batch_is_full or not run.waiting) and run.chunked_req is None:
        return None
    running_bs = running.batch_size()
    if pieces.rows.available_size() <= 0 and run.chunked_req is None:
        running.batch_is_full = True
        return None
    pieces.policy.calc_priority(run.waiting, running)
    chunk = run.budget if run.chunked else None
    adder = sglang.PrefillAdder(
        run.page_size,
        pieces.tree,
        pieces.allocator,
        running,
        pieces.ratio.current,
        run.budget,
        chunk,
        0,
        0,
        max_running_requests=run.batch_limit,
        waiting_queue_len=len(run.waiting),
    )
    if run.chunked_req is not None:
        run.chunked_req.init_next_round_input()
        adder.chunked_req_limit = pieces.policy.shortest_prefill_chunk_limit(
            run.chunked_req, run.waiting, adder.rem_chunk_tokens or 0, run.page_size
        )
        run.chunked_req = adder.add_chunked_req(run.chunked_req)
    for req in run.waiting:
        if adder.budget_state() == sglang.AddReqResult.OTHER:
            break
        held = sum(r.kv.holds_kv for r in adder.can_run_list)
        allocatable = min(
            run.batch_limit - running.batch_size(), pieces.rows.available_size() + held
        )
        if len(adder.can_run_list) >= allocatable:
            running.batch_is_full = True
            break
        req.init_next_round_input(pieces.tree)
        result = adder.add_one_req(
            req, has_chunked_req=run.chunked_req is not None, truncation_align_size=None
        )
        if result != sglang.AddReqResult.CONTINUE:
            if result == sglang.AddReqResult.NO_TOKEN:
                running.batch_is_full = bool(adder.can_run_list) or running_bs > 0
            break
    can_run = adder.can_run_list
    if not can_run:
        return None
    admitted = set(map(id, can_run))
    run.waiting = [r for r in run.waiting if id(r) not in admitted]
    if adder.new_chunked_req is not None:
        run.chunked_req = adder.new_chunked_req
    if run.chunked_req is not None:
        run.chunked_req.inflight_middle_chunks += 1
    batch = sglang.ScheduleBatch.init_new(
        can_run,
        pieces.rows,
        pieces.allocator,
        pieces.tree,
        _MODEL,
        False,
        sglang.no_speculation,
        chunked_req=run.chunked_req,
    )
    batch.prepare_for_extend()
    batch.decoding_reqs = None
    return batch


_MODEL = SimpleNamespace(vocab_size=1 << 62, is_encoder_decoder=False, hf_text_config=None)
"""What ``ScheduleBatch`` reads of a model config: a vocabulary past every fake token id."""


def _schedule_ops(run: _Run, batch: Any) -> list[Operation]:
    """Each request's new pages, in batch order: an admission shares its prefix-cache hit and
    takes the rest fresh; a request already in the batch gains pages at its table's end."""
    ops: list[Operation] = []
    hits: list[Operation] = []
    for req in batch.reqs:
        table = _table(run, req)
        before = run.active.get(req.rid)
        if before is None:
            ops.append(Admit(req.rid))
            hit = int(req.prefix_len) if batch.forward_mode.is_extend() else 0
            shared = table[: hit // run.page_size]
            if shared:
                ops.append(Share(req.rid, shared))
            if table[len(shared) :]:
                ops.append(Alloc(req.rid, table[len(shared) :]))
            if hit:
                hits.append(Cache(req.rid, hit))
        else:
            if table[: len(before)] != before:
                _rewritten(req.rid)
            if table[len(before) :]:
                ops.append(Alloc(req.rid, table[len(before) :]))
        run.active[req.rid] = table
    return ops + hits


def _step_ops(run: _Run, batch: Any) -> list[Operation]:
    """What the step computes: a prefill's extend tokens, with a token unless the chunk stops
    short of the prompt's end; a decode, one token each."""
    if not batch.forward_mode.is_extend():
        return [Decode(ids_json(tuple(req.rid for req in batch.reqs)))]
    ops: list[Operation] = []
    for req in batch.reqs:
        ops.append(Compute(req.rid, req.extend_end - req.prefix_len))
    ops += [Token(req.rid) for req in batch.reqs if req is not run.chunked_req]
    return ops


def _take_result(run: _Run, batch: Any, ends: dict[str, EarlyEnd]) -> list[Any]:
    """``process_batch_result_prefill`` / ``_decode`` with the fake tokens: the finished."""
    sglang, pieces = run.sglang, run.pieces
    done = []
    pieces.allocator.free_group_begin()
    for req in batch.reqs:
        if req.inflight_middle_chunks > 0:  # a chunk short of the prompt's end
            req.inflight_middle_chunks -= 1
            continue
        req.output_ids.append(_token(req, ends.get(req.rid)))
        req.update_finish_state()
        if req.finished():
            sglang.release_kv_cache(req, pieces.tree, checkpoint=True)
            done.append(req)
        elif batch.forward_mode.is_extend():
            sglang.checkpoint_kv_cache(req, pieces.tree)
            _check_table(run, req)
    pieces.allocator.free_group_end()
    return done


def _token(req: Any, end: EarlyEnd | None) -> int:
    if end == ("stop", len(req.output_ids) + 1):
        return STOP_TOKEN
    return output_token(req.rid, req.seqlen)


def _abort(run: _Run, reqs: dict[str, Any], abort_at: dict[str, int], iteration: int) -> list[Any]:
    """``Scheduler.abort_request`` for the aborts due: a queued request leaves the queue (the
    finished it returns); a running one is marked and ends at its next step. A request in a
    chunked prefill is aborted once its prefill ends."""
    done = []
    for rid, when in list(abort_at.items()):
        req = reqs[rid]
        if req.finished():
            del abort_at[rid]
        elif when <= iteration and req is not run.chunked_req:
            del abort_at[rid]
            if req in run.waiting:
                run.waiting.remove(req)
                req.to_finish = run.sglang.FINISH_ABORT("aborted")
                req.update_finish_state()
                done.append(req)
            else:
                req.to_finish = run.sglang.FINISH_ABORT("aborted")
    return done


def _table(run: _Run, req: Any) -> tuple[int, ...]:
    """The pages of ``req``'s token slots in SGLang's ``ReqToTokenPool``, in order."""
    if not req.kv.holds_kv:
        return ()
    slots = run.pieces.rows.req_to_token[req.kv.req_pool_idx, : req.kv.kv_allocated_len]
    pages = (slots // run.page_size).tolist()
    return tuple(dict.fromkeys(int(p) for p in pages))


def _check_table(run: _Run, req: Any) -> None:
    before = run.active.get(req.rid)
    if before is not None and _table(run, req) != before:
        _rewritten(req.rid)


def _rewritten(rid: str) -> None:
    raise RecorderError(
        f"SGLang's radix tree replaced pages of {rid!r} in the middle of its table with copies "
        "it already held (two requests computed the same prefix side by side); a version-2 log "
        "cannot say that yet: let a prefix group's first request finish its prefill before the "
        "others arrive"
    )


def _frees(rid: str, before: tuple[int, ...], after: tuple[int, ...]) -> list[Operation]:
    kept = set(after)
    released = tuple(page for page in before if page not in kept)
    return [Free(rid, released)] if released else []


def _refuse(options: RecordOptions) -> None:
    refused = [
        (bool(options.prefill_chunk), "--prefill-chunk (SGLang chunks at its prefill budget)"),
        (options.prefill_interval != 1, "--prefill-interval (not driven here)"),
        (options.watermark > 0, "--watermark (SGLang keeps no free share)"),
    ]
    for wrong, what in refused:
        if wrong:
            raise RecorderError(f"the SGLang recorder has no such setting: {what}")


def _check_fits(workload: Workload, clip: int) -> None:
    """Refuse a workload with a request SGLang never admits, even to an idle pool: its
    ``PrefillAdder`` admits a request only while its prompt, its new tokens (at most ``clip``,
    SGLang's ``CLIP_MAX_NEW_TOKENS``) and a page for alignment stay below the pool's tokens.
    Such a request would wait at the head of the queue forever (spec/eventlog.md cannot yet
    say that an engine rejects it), so the recording is refused as invalid input."""
    limits = workload.limits
    usable = (limits.pool_pages - 1) * limits.page_size  # page 0 is SGLang's padding
    for request in workload.requests:
        if request.prompt_tokens < 1:
            raise RecorderError(f"request {request.id!r} has no prompt; SGLang needs one")
        need = request.prompt_tokens + min(request.output_tokens, clip) + limits.page_size
        if need >= usable:
            fits = pages_for(need + 1, limits.page_size) + 1
            raise RecorderError(
                f"request {request.id!r} asks SGLang for {need} tokens (its prompt, its output "
                f"and a page of {limits.page_size} for alignment), and SGLang admits a request "
                f"only below the pool's {usable} usable tokens (page 0 is its padding): it would "
                f"wait forever; raise limits.pool_pages to at least {fits}"
            )


def _check_budget(workload: Workload, budget: int) -> None:
    """Without chunking SGLang's ``PrefillAdder`` admits the first request of a batch whole,
    whatever the budget: refuse a request whose prefill (its prompt and output but the last,
    recomputed after a retraction) would compute more than the budget the log declares."""
    for request in workload.requests:
        tokens = request.prompt_tokens + request.output_tokens - 1
        if tokens > budget:
            raise RecorderError(
                f"request {request.id!r} may prefill {tokens} tokens at once (its prompt and "
                f"output after a retraction), more than --token-budget {budget}, and without "
                "chunked prefill SGLang admits it whole: raise the budget"
            )


def _bound(workload: Workload) -> int:
    """Iterations after which a run that has not drained is stopped (LIVE-1 judges it)."""
    tokens = sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
    return max(r.arrival for r in workload.requests) + tokens + len(workload.requests) + 1
