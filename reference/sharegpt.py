"""A seeded workload with ShareGPT-like lengths, for the vLLM paper's Figure 2 (docs/figure2.md).

The paper gives ShareGPT's means (161.31 prompt tokens, 337.99 output tokens), not the dataset's
shape, and kvsched downloads nothing, so the lengths are drawn, not sampled from the dataset:
prompt and output independently from a log-logistic distribution of shape 2, a heavy right tail
(``P(X > x)`` falls as ``x^-2``) like a chat log's, then kept only when they pass the filter
vLLM's benchmark applies to ShareGPT (both at least 4 tokens, the prompt at most 1,024, the two
at most 2,048). The scales below put the filtered means at the paper's (a million requests of
seed 0: 161.1 and 337.8). As in :mod:`.families`, only ``random.Random.random()`` is drawn and it is
turned into a length with ``sqrt`` and ``floor``, which are exactly rounded, so a seed gives the
same workload on every machine.
"""

from __future__ import annotations

import math
import random

from kvsched.spec.vllm_paper import MAX_MODEL_LEN
from kvsched.spec.workload import Limits, Request, Workload

PROMPT_SCALE = 119.4
"""Median of the prompt's log-logistic draw, in tokens, before the filter."""
OUTPUT_SCALE = 255.3
"""Median of the output's log-logistic draw, in tokens, before the filter."""
SHORTEST = 4
LONGEST_PROMPT = 1024


def sharegpt_like(size: int, seed: int, pool_slots: int, page_size: int = 16) -> Workload:
    """``size`` requests, all waiting at iteration 0, with limits of ``pool_slots`` slots."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    rng = random.Random(f"sharegpt-like/{seed}/lengths")
    requests: list[Request] = []
    while len(requests) < size:
        prompt, output = _log_logistic(rng, PROMPT_SCALE), _log_logistic(rng, OUTPUT_SCALE)
        if _kept(prompt, output):
            requests.append(Request(f"r{len(requests)}", 0, prompt, output))
    return Workload(
        name=f"sharegpt-like-n{size}-s{seed}",
        # The batch limit is vLLM's default max_num_seqs, so memory, not slots, binds.
        limits=Limits(batch_limit=256, page_size=page_size, pool_pages=pool_slots // page_size),
        requests=tuple(requests),
        description=f"kvsched.reference.sharegpt.sharegpt_like({size}, {seed}, {pool_slots})",
    )


def _kept(prompt: int, output: int) -> bool:
    """vLLM's ShareGPT filter: no tiny turns, no prompt over 1,024, nothing over the model."""
    return (
        prompt >= SHORTEST
        and output >= SHORTEST
        and prompt <= LONGEST_PROMPT
        and prompt + output <= MAX_MODEL_LEN
    )


def _log_logistic(rng: random.Random, scale: float) -> int:
    """Inverse CDF of ``F(x) = x^2 / (scale^2 + x^2)``: ``scale * sqrt(u / (1 - u))``."""
    u = rng.random()  # in [0, 1), so 1 - u > 0
    return math.floor(scale * math.sqrt(u / (1.0 - u)))
