"""The bounds of schemas/workload.schema.json, which the workload loader (:mod:`.workload`)
enforces.

Far beyond any serving trace, they keep every run finite and every structure small: the engine
steps through each iteration up to the last arrival, and a learner's state lists every free page
of the pool.
"""

from __future__ import annotations

MAX_LIMIT = 65_536
"""The most decode slots, and the largest page size."""
MAX_POOL_PAGES = 1 << 20
MAX_ARRIVAL = 100_000
"""The latest arrival: the engine steps through every iteration before it (0.2 s per 10,000
idle iterations of the reference, more through a target's host process)."""
MAX_PROMPT_TOKENS = 1_000_000
MAX_OUTPUT_TOKENS = 100_000
"""Each output token is an iteration of the engine loop."""
MAX_REQUESTS = 100_000
MAX_ID_LENGTH = 256

LIMIT_FIELDS = {  # field -> (minimum, maximum)
    "batch_limit": (1, MAX_LIMIT),
    "page_size": (1, MAX_LIMIT),
    "pool_pages": (1, MAX_POOL_PAGES),
}
REQUEST_NUMBERS = {  # a request's number fields -> (minimum, maximum); its id is a string
    "arrival": (0, MAX_ARRIVAL),
    "prompt_tokens": (0, MAX_PROMPT_TOKENS),
    "output_tokens": (1, MAX_OUTPUT_TOKENS),
}
REQUEST_FIELDS = ("id", *REQUEST_NUMBERS)
"""A request's required fields, in the order a workload writes them."""
