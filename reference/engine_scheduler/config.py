"""What the engine scheduler is built with, and what it declares (spec/semantics.md, 10.1).

Each field is one design choice a real engine makes; :meth:`EngineConfig.properties` turns the
choices into the declarations the monitor reads, so the scheduler is checked for exactly what it
does. The named configurations are the engines and the lesson's two policies.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import (
    AdmissionOrder,
    Batching,
    Chunking,
    PageAdmission,
    Rejection,
    Victim,
)


@dataclass(frozen=True)
class EngineConfig:
    """The engine scheduler's design; the defaults are vLLM v1's."""

    token_budget: int | None = 2048
    """Tokens computed per iteration at most (``max_num_batched_tokens``); ``None``: unbounded."""
    chunking: Chunking = "all"
    batching: Batching = "mixed"
    order: AdmissionOrder = "fcfs"
    victim: Victim = "last"
    prefix_caching: bool = True
    watermark_pages: int = 0
    null_page: bool = True
    admission: PageAdmission = "lazy"
    static: bool = False
    """Admit only when nothing runs (static batching, 5.1)."""
    admit_after_preemption: bool = False
    """Admit in a ``schedule()`` that preempted, as vidur's Sarathi scheduler does; vLLM does
    not. With it a request can be preempted and re-admitted forever (LIVE-3, spec/proofs.md 8.3)."""
    prefill_chunk: int | None = None
    """The most tokens one request computes in a step, when more than one request is running or
    waiting (vLLM's ``long_prefill_token_threshold``, which vLLM 0.33 lifts for a request alone:
    nobody is then starved by it); ``None``: the budget."""
    max_partial_prefills: int | None = None
    """At most this many running requests continue their prefill per step, the first in the
    running order; the others wait, while admissions are not capped (a cap on partial prefills
    in flight, as vLLM v0's ``max_num_partial_prefills`` names it). ``None``: no cap, as in
    vLLM 0.33, whose v1 scheduler has no such option."""
    rejects_infeasible: Rejection = "at-head"
    """When a request the pool can never hold (semantics.md 1.2) is finished without its
    output: as it comes to the head of the queue, or as it arrives (LIVE-5)."""
    state_slots: int | None = None
    """A pool of this many per-request state slots beside the pages (SGLang's mamba slots): a
    request takes one as it is admitted and gives it back when it finishes or is preempted, and
    admission waits for a free one (SLOT-1, SLOT-2); ``None``: no such pool."""
    name: str = "engine"

    def __post_init__(self) -> None:
        if self.chunking != "none" and self.token_budget is None:
            raise ValueError(f"chunking {self.chunking!r} needs a token_budget to chunk under")
        if self.admission == "peak" and (self.chunking != "none" or self.prefix_caching):
            raise ValueError("peak admission is the lesson's: no chunking, no prefix caching")
        if self.order == "none":
            raise ValueError("the engine scheduler needs an order to take waiting requests in")
        if self.state_slots is not None and self.state_slots < 1:
            raise ValueError(f"state_slots must be >= 1, got {self.state_slots}")
        if self.watermark_pages < 0:
            raise ValueError(f"watermark_pages must be >= 0, got {self.watermark_pages}")
        for cap in ("prefill_chunk", "max_partial_prefills"):
            value = getattr(self, cap)
            if value is not None and (value < 1 or self.chunking != "all"):
                raise ValueError(f"{cap} must be >= 1 and needs chunking 'all', got {value}")
        if self.max_partial_prefills is not None and self.batching != "mixed":
            raise ValueError("max_partial_prefills caps the running loop of a mixed batch")
        # A priority victim can be a prefill scheduled earlier in the step: its place in the cap
        # is spent, which the monitor allows for only under the priority order.
        capped = self.max_partial_prefills is not None
        if capped and self.victim != "last" and self.order != "priority":
            raise ValueError("max_partial_prefills with a priority victim needs order priority")

    def properties(self) -> TargetProperties:
        """The declarations that describe this design to the monitor (eventlog.md 4)."""
        chunked = self.chunking != "none"
        lesson = self.admission == "peak"
        return TargetProperties(
            # It batches continuously (or statically): the policy's conformance rules apply,
            # as its other declarations qualify them.
            policy="static" if self.static else "continuous",
            admission=self.admission,
            token_budget=self.token_budget,
            chunked_prefill=chunked,
            preemption=not lesson,
            prefix_sharing=self.prefix_caching,
            reserved_pages=(0,) if self.null_page else (),
            watermark_pages=self.watermark_pages,
            order=self.order,
            chunking=self.chunking,
            prefill_chunk=self.prefill_chunk,
            max_partial_prefills=self.max_partial_prefills,
            # The batch runs first, each request as far as the budget reaches; whole prompts
            # under a budget skip one that does not fit for the next that does.
            serves_running=self.batching == "mixed"
            and (self.chunking == "all" or self.token_budget is None),
            rejects_infeasible=self.rejects_infeasible,
            state_slots=self.state_slots,
        )


VLLM_V1 = EngineConfig(name="vllm-v1")
NANO_CHUNKED = EngineConfig(
    token_budget=512, chunking="first", batching="prefill-first", null_page=False, name="nano"
)
NANO_CLASSIC = replace(NANO_CHUNKED, token_budget=8192, chunking="none", name="nano-classic")
CONTINUOUS = EngineConfig(
    token_budget=None,
    chunking="none",
    prefix_caching=False,
    null_page=False,
    admission="peak",
    name="continuous",
)
STATIC = replace(CONTINUOUS, static=True, name="static")

HYBRID = replace(VLLM_V1, token_budget=16, state_slots=2, name="hybrid")
"""vLLM v1's design with a pool of two state slots, as a hybrid model's (SGLang's mamba slots):
at most two requests run whatever the batch limit. Not among :data:`CONFIGS`, whose designs the
batched replay and ``kvsched replay --engine`` compare; checked as a class
(``kvsched.reference.engine_scheduler:HybridScheduler``)."""

CONFIGS: dict[str, EngineConfig] = {
    c.name: c for c in (VLLM_V1, NANO_CHUNKED, NANO_CLASSIC, CONTINUOUS, STATIC)
}
"""Named designs: ``kvsched.reference.engine_scheduler:CONFIGS[name]``."""
