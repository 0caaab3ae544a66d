"""What a recorder is: a real engine's scheduler, driven over a workload, writing a version-2 log.

A recorder owns three things and nothing else (spec/eventlog.md, section 8):

- ``properties(workload, options)``: what the engine's design is, as the log declares it
  (admission, token budget, chunking, preemption, prefix sharing, reserved pages). This is the
  recorder's claim about the engine, checked by every run it records.
- ``record(workload, writer, options)``: the loop. Per iteration it hands over the arrivals
  (request ``r`` at iteration ``r.arrival + 1``), lets the engine schedule, runs a fake step
  (no model: a token is "sampled" when a request's computed tokens reach its prompt and output
  so far), lets the engine take the step's output, and writes what happened, in order, with
  :class:`~kvsched.checks.eventlog.writer.LogWriter`. Fake prompts are token ids made from the
  request id, so two requests share cache blocks only where the workload says they share a
  prefix.
- a lazy import of the engine, so kvsched imports without it and a missing engine is a clean
  :class:`RecorderError` naming the install command.

With ``early_stops``, :func:`early_end` says which requests end early and how (a stop token at
a given output position, or an abort a given number of iterations after arrival), so every
recorder stops the same requests.

A nano-vllm or SGLang recorder is one module with these three functions added to
:data:`~kvsched.checks.record.registry.RECORDERS`; ``kvsched record NAME`` then drives it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from kvsched.checks.eventlog.writer import LogWriter
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Request, Workload

SchedulingPolicy = Literal["fcfs", "priority"]
SCHEDULING_POLICIES: tuple[SchedulingPolicy, ...] = get_args(SchedulingPolicy)


class RecorderError(RuntimeError):
    """The engine cannot be driven here: not installed, or it refuses the workload or options."""


@dataclass(frozen=True)
class RecordOptions:
    """Engine settings a workload does not fix."""

    token_budget: int = 256
    """Tokens the engine may compute per iteration (vLLM's ``max_num_batched_tokens``)."""
    max_iterations: int = 0
    """Stop after this many iterations, drained or not (0: the workload's LIVE-1 bound)."""
    policy: SchedulingPolicy = "fcfs"
    """The waiting queue's order: ``"fcfs"``, or ``"priority"`` (least ``priority`` first,
    then arrival; vLLM then also preempts the lowest-priority running request)."""
    chunked_prefill: bool = True
    """Whether a prompt may be computed over several iterations under the token budget."""
    prefill_chunk: int = 0
    """The most prompt tokens one request computes in one iteration (vLLM's
    ``long_prefill_token_threshold``); 0: no cap below the budget."""
    prefix_caching: bool = True
    """Whether the engine caches prompt blocks and shares them between requests (vLLM's
    ``enable_prefix_caching``); the log declares ``prefix_sharing`` the same."""
    prefill_interval: int = 1
    """Steps between two that may carry prefill (vLLM's ``prefill_schedule_interval``): a held
    step leaves waiting requests waiting, so the log declares ``estimate_admission``, under
    which work conservation (BATCH-3) is not promised."""
    watermark: float = 0.0
    """The share of the pool kept free when admitting (vLLM's ``watermark``); the log declares
    ``watermark_pages``, that share of ``pool_pages`` rounded down, as vLLM counts it."""
    early_stops: bool = False
    """End some requests before their output length (:func:`early_end`): a stop token, or an
    abort wherever the request is. The log then declares ``stops_early`` (spec/eventlog.md 4.9)."""
    source: Path | None = None
    """The engine's source checkout, for an engine its users have as a clone (nano-vllm)."""


@dataclass(frozen=True)
class Recorder:
    """One engine's recorder: its name, its declared design and its loop."""

    name: str
    properties: Callable[[Workload, RecordOptions], TargetProperties]
    record: Callable[[Workload, LogWriter, RecordOptions], None]


def prompt_tokens(request: Request) -> list[int]:
    """Fake prompt token ids: the group's shared prefix, then tokens only this request has.

    Each run of ids starts at a 48-bit hash of the request id (or the group), so two requests
    share a cache block only where the workload says they share a prefix.
    """
    start = _start(request.id)
    tokens = [start + i for i in range(request.prompt_tokens)]
    if request.prefix_group and request.prefix_tokens:
        group = _start("prefix group " + request.prefix_group)
        tokens[: request.prefix_tokens] = [group + i for i in range(request.prefix_tokens)]
    return tokens


def output_token(request_id: str, position: int) -> int:
    """The fake token a request samples at ``position`` of its sequence: its own run of ids,
    continued past the prompt. So no cache block beyond a declared prefix ever matches another
    request's. One token for every request would break that: two requests whose shared prompt
    ends inside a block would fill the rest of it alike, and an engine would rightly share a
    block the workload says they do not (PAGE-6 would then accuse a correct engine)."""
    return _start(request_id) + position


STOP_TOKEN = 1 << 50
"""The stop token a request samples to end early: beyond every id :func:`output_token` makes."""
EarlyEnd = tuple[Literal["stop", "abort"], int]


def early_end(request: Request) -> EarlyEnd | None:
    """How ``request`` ends before its output length when early stops are recorded, if it does:
    one in three samples :data:`STOP_TOKEN` as its k-th output token (``("stop", k)``, k below its
    most), as an end-of-sequence token or a stop string would end it; one in five of the others
    is aborted at the end of the k-th iteration it has been in the engine (``("abort", k)``, k
    from 1 to 32), as a client that gives up aborts it: still queued, mid-prefill, decoding or
    preempted, or not at all if it finished first. The choice is a hash of the id, so a run is
    reproducible."""
    draw = _start("early end " + request.id)
    which, when = draw % 15, draw >> 24  # bits apart: which requests, and when, independent
    if which % 3 == 0 and request.output_tokens > 1:
        return "stop", 1 + when % (request.output_tokens - 1)
    if which % 5 == 0:
        return "abort", 1 + when % 32
    return None


def _start(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=6).digest(), "big")
