"""The vLLM recorder: vLLM's own v1 Scheduler, KVCacheManager and BlockPool, on CPU, no model.

The scheduler is vLLM's, unmodified, built as vLLM's own scheduler tests build it: a tiny model
config read from a local ``config.json`` (no weights, no tokenizer, no hub), one full-attention
KV cache group of ``pool_pages`` blocks of ``page_size`` tokens, prefix caching on, FCFS. Only
the model is faked: after each ``schedule()`` the step "samples" a token for every request whose
computed tokens reach its prompt and output so far (its own, :func:`~.base.output_token`), and
``update_from_output()`` takes it as a model runner's output. ``max_tokens`` with ``ignore_eos``
ends each request at its output length.

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

import json
import os
import tempfile
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
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Workload, pages_for

INSTALL = (
    "install the vLLM recorder's extra first: pip install -r extras/vllm-cpu.txt && "
    "pip install --no-deps vllm==0.33.0 xgrammar==0.2.9 (a CPU torch, vLLM without its GPU "
    "dependencies, and what its scheduler imports)"
)
_TINY_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 32000,
    "max_position_embeddings": 1 << 20,
    "torch_dtype": "float32",
}


def properties(workload: Workload, options: RecordOptions) -> TargetProperties:
    """vLLM v1's design: lazy block allocation under a token budget, chunked prefill (unless
    turned off; capped per request if asked), preemption by recompute, prefix caching with
    reference counts, block 0 the null block, and the waiting queue's order (fcfs, or priority
    then arrival)."""
    if options.prefill_chunk and not options.chunked_prefill:
        raise RecorderError("a prefill chunk caps chunked prefill, which is turned off here")
    return TargetProperties(
        policy="continuous",
        admission="lazy",
        token_budget=options.token_budget,
        chunked_prefill=options.chunked_prefill,
        prefill_chunk=options.prefill_chunk or None,
        preemption=True,
        prefix_sharing=True,
        reserved_pages=(0,),
        order="priority" if options.policy == "priority" else None,
    )


def record(workload: Workload, writer: LogWriter, options: RecordOptions) -> None:
    """Drive vLLM's scheduler over ``workload``, writing each iteration to ``writer``."""
    vllm = _import_vllm()
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
        scheduler = _scheduler(vllm, workload, options)
    except ValueError as error:  # vLLM's configs validate with pydantic (a ValueError)
        reason = str(error).splitlines()
        why = next((line.strip() for line in reason if "error," in line), reason[-1].strip())
        why = why.split(" [type=")[0].removeprefix("Value error, ")
        raise RecorderError(f"vLLM refuses this configuration: {why}") from None
    requests = {r.id: r for r in workload.requests}
    arrivals = sorted(workload.requests, key=lambda r: r.arrival)  # stable: ties in order
    bound = options.max_iterations or _bound(workload)
    hasher = _block_hasher(vllm, scheduler)
    manager = scheduler.kv_cache_manager
    next_arrival, finished, iteration = 0, 0, 0
    while finished < len(requests) and iteration < bound:
        iteration += 1
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival < iteration:
            request = arrivals[next_arrival]
            # The arrival position as the arrival time: vLLM's priority queue breaks ties of
            # priority by it, as the declared order does (spec/eventlog.md 4.6).
            scheduler.add_request(_vllm_request(vllm, request, hasher, float(next_arrival)))
            next_arrival += 1
        running = [r.request_id for r in scheduler.running]
        queue = {r.request_id: i for i, r in enumerate(scheduler.waiting)}
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
        tokens = {rid: output_token(rid, scheduler.requests[rid].num_tokens) for rid in sampled}
        scheduler.update_from_output(output, _runner_output(vllm, scheduled, tokens))
        done = [rid for rid in scheduled if rid not in scheduler.requests]
        ops += [Finish(rid) for rid in done]
        ops += [Free(rid, tables[rid]) for rid in done if tables[rid]]
        finished += len(done)
        waiting = tuple(r.request_id for r in scheduler.waiting)
        writer.iteration(ops, scheduler.kv_cache_manager.block_pool.get_num_free_blocks(), waiting)


def _blocks(manager: Any, rid: str) -> tuple[int, ...]:
    return tuple(manager.get_block_ids(rid)[0])


def _samples(request: Any) -> bool:
    """Whether the step samples a token for ``request``: its KV now covers every token it has."""
    return bool(request.num_computed_tokens >= request.num_tokens)


def _bound(workload: Workload) -> int:
    """Iterations after which a run that has not drained is stopped (LIVE-1 judges it)."""
    tokens = sum(r.prompt_tokens + r.output_tokens for r in workload.requests)
    return max(r.arrival for r in workload.requests) + tokens + len(workload.requests) + 1


def _import_vllm() -> SimpleNamespace:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    try:
        import torch
        from vllm import SamplingParams
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import Request
        from vllm.v1.structured_output import StructuredOutputManager
    except ImportError as error:
        raise RecorderError(f"vLLM's scheduler cannot be imported ({error}); {INSTALL}") from None
    return SimpleNamespace(
        torch=torch,
        SamplingParams=SamplingParams,
        CacheConfig=CacheConfig,
        ModelConfig=ModelConfig,
        SchedulerConfig=SchedulerConfig,
        VllmConfig=VllmConfig,
        get_hash_fn_by_name=get_hash_fn_by_name,
        get_request_block_hasher=get_request_block_hasher,
        init_none_hash=init_none_hash,
        Scheduler=Scheduler,
        FullAttentionSpec=FullAttentionSpec,
        KVCacheConfig=KVCacheConfig,
        KVCacheGroupSpec=KVCacheGroupSpec,
        ModelRunnerOutput=ModelRunnerOutput,
        Request=Request,
        StructuredOutputManager=StructuredOutputManager,
    )


def _scheduler(vllm: SimpleNamespace, workload: Workload, options: RecordOptions) -> Any:
    limits = workload.limits
    longest = max(r.prompt_tokens + r.output_tokens for r in workload.requests)
    with tempfile.TemporaryDirectory(prefix="kvsched-vllm-model-") as model:
        Path(model, "config.json").write_text(json.dumps(_TINY_MODEL), encoding="utf-8")
        model_config = vllm.ModelConfig(
            model=model, skip_tokenizer_init=True, max_model_len=longest, dtype="float32"
        )
    scheduler_config = vllm.SchedulerConfig(
        max_num_seqs=limits.batch_limit,
        max_num_batched_tokens=options.token_budget,
        max_model_len=longest,
        is_encoder_decoder=False,
        enable_chunked_prefill=options.chunked_prefill,
        long_prefill_token_threshold=options.prefill_chunk,
        policy=options.policy,
    )
    cache_config = vllm.CacheConfig(block_size=limits.page_size, enable_prefix_caching=True)
    cache_config.num_gpu_blocks = limits.pool_pages
    config = vllm.VllmConfig(
        model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config
    )
    spec = vllm.FullAttentionSpec(
        block_size=limits.page_size, num_kv_heads=1, head_size=1, dtype=vllm.torch.float32
    )
    kv_cache = vllm.KVCacheConfig(
        num_blocks=limits.pool_pages,
        kv_cache_tensors=[],
        kv_cache_groups=[vllm.KVCacheGroupSpec(["layer"], spec)],
    )
    return vllm.Scheduler(
        vllm_config=config,
        kv_cache_config=kv_cache,
        structured_output_manager=vllm.StructuredOutputManager(config),
        block_size=limits.page_size,
    )


def _block_hasher(vllm: SimpleNamespace, scheduler: Any) -> Any:
    cache = scheduler.cache_config
    hash_fn = vllm.get_hash_fn_by_name(cache.prefix_caching_hash_algo)
    vllm.init_none_hash(hash_fn)
    return vllm.get_request_block_hasher(cache.block_size, hash_fn)


def _vllm_request(vllm: SimpleNamespace, request: Any, hasher: Any, arrival: float) -> Any:
    params = vllm.SamplingParams(max_tokens=request.output_tokens, ignore_eos=True)
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
