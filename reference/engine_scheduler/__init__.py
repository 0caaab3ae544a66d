"""The reference engine scheduler (spec/semantics.md, section 10): lazy pages, a token budget,
chunked prefill, recompute preemption and a prefix cache, each a configuration choice.

:mod:`.blocks` is the reference-counted pool with its prefix cache, :mod:`.config` the design
choices and what they declare, :mod:`.sequence` a request as the scheduler tracks it,
:mod:`.scheduler` the scheduler itself (protocol version 2).
"""

from .blocks import BlockManager
from .config import (
    CONFIGS,
    CONTINUOUS,
    HYBRID,
    NANO_CHUNKED,
    NANO_CLASSIC,
    STATIC,
    VLLM_V1,
    EngineConfig,
)
from .scheduler import EngineScheduler

VLLMV1Scheduler = EngineScheduler.configured(VLLM_V1)
NanoChunkedScheduler = EngineScheduler.configured(NANO_CHUNKED)
NanoClassicScheduler = EngineScheduler.configured(NANO_CLASSIC)
EngineContinuousScheduler = EngineScheduler.configured(CONTINUOUS)
EngineStaticScheduler = EngineScheduler.configured(STATIC)
HybridScheduler = EngineScheduler.configured(HYBRID)

__all__ = [
    "CONFIGS",
    "CONTINUOUS",
    "HYBRID",
    "NANO_CHUNKED",
    "NANO_CLASSIC",
    "STATIC",
    "VLLM_V1",
    "BlockManager",
    "EngineConfig",
    "EngineContinuousScheduler",
    "EngineScheduler",
    "EngineStaticScheduler",
    "HybridScheduler",
    "NanoChunkedScheduler",
    "NanoClassicScheduler",
    "VLLMV1Scheduler",
]
