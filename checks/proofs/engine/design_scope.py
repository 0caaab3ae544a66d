"""What the engine Z3 model covers, and what it refuses (spec/proofs.md, section 8).

The model is ``reference/engine_scheduler`` in one family of designs: a token budget with every
prompt chunkable (``chunking="all"``), fcfs with preempted requests at the queue's head, the last
admitted as the victim, lazy page admission, continuous (not static) batching, either batching
(``mixed`` or ``prefill-first``), any watermark, admitting in a ``schedule()`` that preempted or
not (``admit_after_preemption``). It leaves out the prefix cache (shared pages and
their reference counts), the null page, priority victims and orders, first-only and whole-prompt
chunking, and peak admission: a design with any of them is refused rather than half-modelled.
It counts pages rather than naming them, so PAGE-2 (no page with two owners) and PAGE-6 stay the
monitor's.
"""

from __future__ import annotations

from kvsched.reference.engine_scheduler import EngineConfig
from kvsched.spec.scope import COVERED, Scope, outside

MONITOR = "the runtime monitor on the reference engine, kvsched check with the design's class"

MODELLED = {
    "chunking": "all",
    "order": "fcfs",
    "victim": "last",
    "prefix_caching": False,
    "null_page": False,
    "admission": "lazy",
    "static": False,
}
"""The design choices the model fixes; batching, token budget, watermark and
``admit_after_preemption`` stay free."""


def engine_scope(config: EngineConfig) -> Scope:
    """Whether the engine model describes the reference engine scheduler built with ``config``."""
    departures = [
        f"{name}={getattr(config, name)!r} (the model has {value!r})"
        for name, value in MODELLED.items()
        if getattr(config, name) != value
    ]
    if config.token_budget is None:
        departures.append("no token budget (the model needs one)")
    if departures:
        why = "the design departs from the modelled one: " + ", ".join(departures)
        return outside(why, MONITOR)
    return COVERED
