"""Small simulated engines that write kvsched event logs, used as test fixtures.

Each mimics how one real engine schedules and allocates KV pages, at toy scale and without a
model: :mod:`.vllm_like` (vLLM v1: chunked prefill under a token budget, preemption by
recompute, prefix caching with reference counts, block 0 reserved as the null block),
:mod:`.nano_like` (nano-vllm: an iteration is all prefill or all decode) and :mod:`.orca_like`
(an Orca-style baseline that reserves pages for a maximum length at admission, behind the
scheduler protocol). Each takes ``bugs``: names of planted bugs from the bug classes reported in
real engines, which the monitor must flag with the right invariant id. :mod:`.record` writes
tests/logs/.
"""
