"""SGLang's scheduling pieces built on the CPU with no model, no GPU and no server.

SGLang's ``Scheduler`` object is built by its server process around a model runner (weights, a
device, attention kernels): about 75 attributes, most of them for features a run here never
uses. The recorder builds instead the pieces the scheduler's loop calls, each SGLang's own class,
unmodified, configured as the ``Scheduler`` configures them:

- ``ReqToTokenPool``, one row per running request (``batch_limit`` rows), as its
  ``max_running_requests``;
- ``PagedTokenToKVPoolAllocator`` over ``pool_pages - 1`` pages of ``page_size`` tokens: SGLang
  hands out pages 1 and up and keeps page 0 as padding, so the log's pool is ``pool_pages``
  with page 0 reserved;
- ``RadixCache``, the prefix tree (``disable=True`` with the prefix cache turned off, as
  ``--disable-radix-cache`` builds it);
- ``SchedulePolicy`` and ``NewTokenRatioTracker``, as ``init_schedule_policy`` builds them;
- the process-wide config that SGLang's pieces read (``get_schedule()``, ``get_exec()``), published
  from SGLang's own defaults by ``override_server_args``, the way SGLang's unit tests do.

SGLang is imported only here, and only when a recorder runs, so kvsched imports without it.
"""

from __future__ import annotations

import os
from importlib import metadata
from types import SimpleNamespace
from typing import Any

from kvsched.checks.record.base import RecorderError

INSTALL = (
    "install the SGLang recorder's extra first: pip install -r extras/sglang-cpu.txt && "
    "pip install --no-deps sglang==0.5.23 (what SGLang's scheduler imports, then SGLang "
    "without its GPU dependencies)"
)
VERSION = "0.5.23"
"""The SGLang release the recorder was written against and checked with."""


def import_sglang() -> SimpleNamespace:
    """SGLang's classes the recorder drives, or a :class:`RecorderError` naming the install."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from sglang.srt.managers.schedule_batch import FINISH_ABORT, Req, ScheduleBatch
        from sglang.srt.managers.schedule_policy import (
            CLIP_MAX_NEW_TOKENS,
            AddReqResult,
            PrefillAdder,
            SchedulePolicy,
        )
        from sglang.srt.managers.scheduler_components.new_token_ratio_tracker import (
            NewTokenRatioTracker,
        )
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.common import checkpoint_kv_cache, release_kv_cache
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
        from sglang.srt.mem_cache.radix_cache import RadixCache
        from sglang.srt.runtime_context import _CONTEXT
        from sglang.srt.sampling.sampling_params import SamplingParams
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except ImportError as error:
        raise RecorderError(f"SGLang's scheduler cannot be imported ({error}); {INSTALL}") from None
    __version__ = metadata.version("sglang")
    if __version__ != VERSION:
        raise RecorderError(
            f"SGLang {__version__} is installed; the recorder drives SGLang {VERSION}'s "
            f"scheduling pieces, whose calls change between releases: {INSTALL}"
        )
    return SimpleNamespace(
        torch=torch,
        FINISH_ABORT=FINISH_ABORT,
        Req=Req,
        ScheduleBatch=ScheduleBatch,
        AddReqResult=AddReqResult,
        PrefillAdder=PrefillAdder,
        SchedulePolicy=SchedulePolicy,
        NewTokenRatioTracker=NewTokenRatioTracker,
        PagedTokenToKVPoolAllocator=PagedTokenToKVPoolAllocator,
        CacheInitParams=CacheInitParams,
        checkpoint_kv_cache=checkpoint_kv_cache,
        release_kv_cache=release_kv_cache,
        ReqToTokenPool=ReqToTokenPool,
        RadixCache=RadixCache,
        context=_CONTEXT,
        SamplingParams=SamplingParams,
        no_speculation=SpeculativeAlgorithm.NONE,
        clip_new_tokens=CLIP_MAX_NEW_TOKENS,
    )


def publish_config(sglang: SimpleNamespace, page_size: int, priority: bool) -> Any:
    """SGLang's process-wide config from its defaults, with the page size (and priority
    scheduling, without priority preemption) set; the handle whose ``restore()`` takes it back."""
    override = sglang.context.override_server_args(
        device="cpu",
        page_size=page_size,
        enable_priority_scheduling=priority,
        schedule_low_priority_values_first=True,
        disable_priority_preemption=True,
    )
    override.install()
    return override


def build_pieces(
    sglang: SimpleNamespace,
    pool_pages: int,
    page_size: int,
    rows: int,
    context_len: int,
    *,
    prefix_caching: bool,
    priority: bool,
) -> SimpleNamespace:
    """The pools, the prefix tree, the policy and the token-ratio tracker, as SGLang's
    ``Scheduler`` builds them for a model of ``context_len`` tokens."""
    rows_pool = sglang.ReqToTokenPool(
        size=rows, max_context_len=context_len, device="cpu", enable_memory_saver=False
    )
    allocator = sglang.PagedTokenToKVPoolAllocator(
        size=(pool_pages - 1) * page_size,
        page_size=page_size,
        dtype=sglang.torch.float32,
        device="cpu",
        kvcache=None,  # the KV tensors: only a model's forward pass reads them
        need_sort=False,
    )
    tree = sglang.RadixCache(
        sglang.CacheInitParams(
            disable=not prefix_caching,
            req_to_token_pool=rows_pool,
            token_to_kv_pool_allocator=allocator,
            page_size=page_size,
        )
    )
    policy = sglang.SchedulePolicy("fcfs", tree, False, priority, True)
    return SimpleNamespace(
        rows=rows_pool,
        allocator=allocator,
        tree=tree,
        policy=policy,
        ratio=sglang.NewTokenRatioTracker.from_config(),
    )
