"""The vLLM paper's Figure 2 and the set-up behind it, as the paper prints them.

Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention",
SOSP 2023 (arXiv 2309.06180). These are the paper's figures, the targets ``kvsched figure2``
sets its own measurements beside; none is a result of ours.
"""

from __future__ import annotations

from .vocabulary import MemoryUse, Reservation

PAPER = "Kwon et al., SOSP 2023 (arXiv 2309.06180)"

PUBLISHED_SHARES: dict[Reservation, dict[MemoryUse, float | None]] = {
    "orca-max": {
        "token states": 20.4,
        "reservation": 13.3,
        "internal fragmentation": 57.3,
        "external & other": 8.9,
    },
    "orca-pow2": {
        "token states": 26.8,
        "reservation": 17.9,
        "internal fragmentation": 13.6,
        "external & other": 41.6,
    },
    "orca-oracle": {
        "token states": 38.2,
        "reservation": 25.2,
        "internal fragmentation": None,
        "external & other": 36.6,
    },
    "vllm": {
        "token states": 96.3,
        "reservation": None,
        "internal fragmentation": None,
        "external & other": None,
    },
}
"""Figure 2, the average share of KV cache memory in percent. ``None`` is a category the paper
leaves out: Oracle has no over-reservation; vLLM's remaining 3.7% is not broken down."""

VLLM_UNSPLIT_REST = 3.7
"""vLLM's share outside token states, given as one figure."""

PUBLISHED_BATCH: dict[Reservation, float] = {
    "orca-max": 7.00,
    "orca-pow2": 9.81,
    "orca-oracle": 13.62,
    "vllm": 30.42,
}
"""Figure 13: mean batched requests, OPT-13B, ShareGPT at 2 requests/s."""

MEAN_PROMPT_TOKENS = 161.31
MEAN_OUTPUT_TOKENS = 337.99
"""ShareGPT's mean input and output lengths in the paper's experiments (its Figure 11)."""

MAX_MODEL_LEN = 2048
"""The model's maximum sequence length, which Orca (Max) reserves."""

TOKEN_SLOTS = 15_700
"""KV token slots of OPT-13B on one A100-40GB (the paper's Table 1: 12 GB, "15.7K")."""
