"""``kvsched record ENGINE WORKLOAD -o LOG``: a real engine's scheduler, run over a workload.

The recorder drives the engine's own scheduler (no model, fake tokens, no GPU) and writes a
version-2 event log declaring the engine's design (spec/eventlog.md, section 8), which
``kvsched check LOG`` then judges. Exit 0 when the log is written; 2 when the workload or the
options are invalid or the engine is not installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kvsched.checks.record.base import SCHEDULING_POLICIES
from kvsched.commands import UsageError
from kvsched.commands.output import emit, writing
from kvsched.spec.vocabulary import ENGINE_NAMES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "record",
        help="run a real engine's scheduler over a workload and write its event log",
        description="Drive ENGINE's own scheduler over WORKLOAD on CPU (no model, no weights, "
        "fake tokens) and write a version-2 event log that declares the engine's design. "
        "Check it with `kvsched check LOG`.",
    )
    parser.add_argument("engine", choices=ENGINE_NAMES, help="the engine to drive")
    parser.add_argument("workload", type=Path, help="a workload file (spec/semantics.md 1)")
    parser.add_argument(
        "-o", "--out", type=Path, required=True, help="the log to write (.gz: gzip)"
    )
    parser.add_argument(
        "--token-budget",
        type=int,
        default=256,
        help="tokens computed per iteration at most (vLLM's max_num_batched_tokens; default 256)",
    )
    parser.add_argument(
        "--policy",
        choices=SCHEDULING_POLICIES,
        default="fcfs",
        help="the waiting queue's order: fcfs (default), or priority (each request's "
        "'priority', least first, then arrival; the lowest-priority running request is "
        "preempted first)",
    )
    parser.add_argument(
        "--no-chunked-prefill",
        dest="chunked_prefill",
        action="store_false",
        help="compute every prompt in one iteration (the token budget must then hold the "
        "longest request)",
    )
    parser.add_argument(
        "--prefill-chunk",
        type=int,
        default=0,
        help="the most prompt tokens one request computes in one iteration (vLLM's "
        "long_prefill_token_threshold; default 0: the token budget)",
    )
    parser.add_argument(
        "--no-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help="turn the prefix cache off (vLLM's enable_prefix_caching); the log then declares "
        "no prefix sharing",
    )
    parser.add_argument(
        "--prefill-interval",
        type=int,
        default=1,
        help="steps between two that may carry prefill (vLLM's prefill_schedule_interval; "
        "default 1: every step); above 1 the log declares estimate_admission",
    )
    parser.add_argument(
        "--watermark",
        type=float,
        default=0.0,
        help="the share of the pool kept free when admitting (vLLM's watermark, from 0 to "
        "below 1; default 0); the log declares watermark_pages",
    )
    parser.add_argument(
        "--early-stops",
        action="store_true",
        help="end some requests early, through the engine's own paths: one in three on a stop "
        "token, one in five of the rest aborted wherever it is (queued, mid-prefill, decoding); "
        "the log declares stops_early (spec/eventlog.md 4.9)",
    )
    parser.add_argument(
        "--src",
        type=Path,
        help="nanovllm only: the nano-vllm checkout whose scheduler to drive (a clone of "
        "GeeeekExplorer/nano-vllm, or an unpacked wheel: the folder that holds nanovllm/)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kvsched.checks.record.base import RecorderError, RecordOptions
    from kvsched.checks.record.registry import record_log
    from kvsched.spec.workload import load_workload

    if args.token_budget < 1:
        raise UsageError(f"--token-budget must be >= 1, got {args.token_budget}")
    if args.prefill_chunk < 0:
        raise UsageError(f"--prefill-chunk must be >= 0, got {args.prefill_chunk}")
    if args.prefill_interval < 1:
        raise UsageError(f"--prefill-interval must be >= 1, got {args.prefill_interval}")
    if not 0 <= args.watermark < 1:
        raise UsageError(f"--watermark must be from 0 to below 1, got {args.watermark}")
    if (args.src is None) == (args.engine == "nanovllm"):
        raise UsageError("--src CHECKOUT names the checkout of record nanovllm, and only of it")
    workload = load_workload(args.workload)
    try:
        with writing(f"--out {args.out}"):
            iterations = record_log(
                args.engine,
                workload,
                args.out,
                RecordOptions(
                    token_budget=args.token_budget,
                    policy=args.policy,
                    chunked_prefill=args.chunked_prefill,
                    prefill_chunk=args.prefill_chunk,
                    prefix_caching=args.prefix_caching,
                    prefill_interval=args.prefill_interval,
                    watermark=args.watermark,
                    early_stops=args.early_stops,
                    source=args.src,
                ),
            )
    except RecorderError as error:
        raise UsageError(str(error)) from None
    emit(f"wrote {args.out}: {iterations} iterations of {args.engine} over {workload.name}")
    return 0
