"""What the declared restart semantics make of a request preempted within its prefill, in words.

Recompute and fold restarts differ only for such a request (spec/eventlog.md 4.3.1): under fold it
comes back with the prompt it had computed and produces the rest of the old prompt as output.
A finding on it under the other declaration is most likely that declaration, not a bug, so the
finding says which restart would explain it and how to declare it. So does a request finished
before its output length by a target that does not declare early stops (4.9).
"""

from __future__ import annotations

from kvsched.spec.vocabulary import Restart

EARLY_STOP_HINT = (
    "; an engine that stops requests on an end-of-sequence token or a stop string, or aborts "
    "them, declares stops_early (spec/eventlog.md 4.9), and output_tokens is then each one's most"
)


def restart_hint(request_id: str, restart: Restart, cut: tuple[int, int, int], moved: int) -> str:
    """The sentence a finding on ``request_id`` ends with: ``cut`` is the iteration in which it
    was last preempted within its prefill, the KV tokens it had then and its prompt plus output
    at the time; ``moved`` is what its folds moved to its output."""
    when, kv, tokens = cut
    if restart == "fold":
        return (
            f". The target declares restart 'fold': preempted in iteration {when} with {kv} "
            f"prompt tokens computed, {request_id!r} came back with a prompt of {kv} tokens "
            f"and owes {moved} more output tokens. An engine that recomputes the whole prompt "
            "after a preemption (vLLM, nano-vllm) declares restart 'recompute', the default"
        )
    return (
        f". {request_id!r} was preempted in iteration {when} with {kv} of its {tokens} tokens "
        "computed, its prefill unfinished; an engine whose restart folds what a request "
        "processed into its prompt (vidur's Request.restart()) brings it back with a prompt of "
        f"{kv} tokens and produces the rest as output. If the target restarts that way by "
        "design, declare restart 'fold' (spec/eventlog.md 4.3.1)"
    )
