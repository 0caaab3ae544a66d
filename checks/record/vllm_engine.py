"""vLLM's scheduler built on CPU with no model, as vLLM's own scheduler tests build it.

A tiny model config read from a local ``config.json`` (no weights, no tokenizer, no hub), one
full-attention KV cache group of ``pool_pages`` blocks of ``page_size`` tokens, prefix caching on
unless turned off. vLLM is imported only here, and only when a recorder runs, so kvsched
imports without it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kvsched.checks.record.base import RecorderError, RecordOptions
from kvsched.spec.workload import Workload

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


def import_vllm() -> SimpleNamespace:
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
        from vllm.v1.request import Request, RequestStatus
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
        RequestStatus=RequestStatus,
        StructuredOutputManager=StructuredOutputManager,
    )


def build_scheduler(vllm: SimpleNamespace, workload: Workload, options: RecordOptions) -> Any:
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
        watermark=options.watermark,
        prefill_schedule_interval=options.prefill_interval,
    )
    cache_config = vllm.CacheConfig(
        block_size=limits.page_size, enable_prefix_caching=options.prefix_caching
    )
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


def block_hasher(vllm: SimpleNamespace, scheduler: Any) -> Any:
    cache = scheduler.cache_config
    hash_fn = vllm.get_hash_fn_by_name(cache.prefix_caching_hash_algo)
    vllm.init_none_hash(hash_fn)
    return vllm.get_request_block_hasher(cache.block_size, hash_fn)
