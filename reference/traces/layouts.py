"""The public trace layouts kvsched reads, each by its exact column names (docs/traces.md).

A layout names the columns that hold a request's arrival time, prompt and output lengths and,
for Mooncake, its prompt's block hashes; every other column is ignored, so a release that adds
columns still reads. Each layout's clock says how its times are written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

TraceLayout = Literal["azure", "burstgpt", "mooncake", "vidur"]
LAYOUT_NAMES: tuple[TraceLayout, ...] = get_args(TraceLayout)

Clock = Literal["datetime", "seconds", "milliseconds"]
"""``datetime``: wall-clock text such as ``2023-11-16 18:17:03.9799600``; ``seconds`` and
``milliseconds``: numbers counted from the trace's own origin."""


@dataclass(frozen=True)
class Layout:
    """Where a layout keeps what a request needs."""

    name: TraceLayout
    source: str
    """Whose files these are, in words, for help and errors."""
    encoding: Literal["csv", "jsonl"]
    time: str
    clock: Clock
    prompt: str
    output: str
    blocks: str = ""
    """The column of the prompt's block hashes (Mooncake's ``hash_ids``); empty: none."""
    time_optional: bool = False
    """The layout's files may carry lengths only, with arrivals from ``--poisson``."""


LAYOUTS: dict[TraceLayout, Layout] = {
    layout.name: layout
    for layout in (
        Layout(
            "azure",
            "Azure LLM inference traces 2023 and 2024 (AzureLLMInferenceTrace_*.csv)",
            "csv",
            "TIMESTAMP",
            "datetime",
            "ContextTokens",
            "GeneratedTokens",
        ),
        Layout(
            "burstgpt",
            "BurstGPT (BurstGPT_*.csv)",
            "csv",
            "Timestamp",
            "seconds",
            "Request tokens",
            "Response tokens",
        ),
        Layout(
            "mooncake",
            "Mooncake FAST'25 traces (*_trace.jsonl)",
            "jsonl",
            "timestamp",
            "milliseconds",
            "input_length",
            "output_length",
            blocks="hash_ids",
        ),
        Layout(
            "vidur",
            "vidur's processed traces (data/processed_traces/*.csv), with arrived_at or lengths "
            "only",
            "csv",
            "arrived_at",
            "seconds",
            "num_prefill_tokens",
            "num_decode_tokens",
            time_optional=True,
        ),
    )
}


def layout_named(name: str) -> Layout:
    """The layout called ``name``; ValueError naming the known ones otherwise."""
    for layout in LAYOUTS.values():
        if layout.name == name:
            return layout
    raise ValueError(f"unknown trace layout {name!r} (known: {', '.join(LAYOUT_NAMES)})")
