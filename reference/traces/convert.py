"""A public trace as a kvsched workload, by stated rules (docs/traces.md).

In order: rows whose response has no token are dropped as failed; the earliest
``max_requests`` rows by arrival are kept (ties in file order), the rest counted; arrivals are
rebased to the first kept one, divided by ``rate`` and cut into iterations of
``arrival_scale`` seconds; lengths are clipped to ``max_model_len``; Mooncake's block hashes
become prefix groups (:mod:`.prefixes`). Every rule that changed a request is counted in the
:class:`ImportReport`, which the workload's description repeats.

Only the kept rows are held: a trace of millions of rows is read in the memory of
``max_requests`` of them.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from kvsched.spec.bounds import MAX_ARRIVAL, MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_REQUESTS
from kvsched.spec.text import plural
from kvsched.spec.workload import (
    Limits,
    Request,
    Workload,
    WorkloadError,
    parse_workload,
    workload_to_json,
)

from .layouts import Layout, layout_named
from .prefixes import shared_prefixes
from .rows import TraceError, TraceRow, read_rows

DEFAULT_LIMITS = Limits(batch_limit=256, page_size=16, pool_pages=8192)
"""vLLM's defaults for slots (``max_num_seqs``) and block size; 131,072 token slots of KV cache."""
DEFAULT_ARRIVAL_SCALE = Decimal("0.05")
"""Seconds per iteration: one decode step of a loaded batch, and an hour of trace in 72,000
iterations, under the 100,000 a workload's arrivals may span."""
MOONCAKE_BLOCK = 512
SHOWN_LINES = 5


@dataclass(frozen=True)
class ImportOptions:
    """How a trace becomes a workload; each field is an option of ``kvsched import``."""

    limits: Limits = DEFAULT_LIMITS
    max_model_len: int = 0
    """Most tokens (prompt plus output) a request may hold; 0: the pool's, pages x page size."""
    arrival_scale: Decimal = DEFAULT_ARRIVAL_SCALE
    rate: Decimal = Decimal(1)
    """Arrival-rate factor: 2 makes every gap between arrivals half as long."""
    poisson: Decimal | None = None
    """Requests per second of seeded Poisson arrivals, in place of the trace's times."""
    seed: int = 0
    max_requests: int = MAX_REQUESTS
    block_tokens: int = MOONCAKE_BLOCK
    name: str = ""

    def model_len(self) -> int:
        return self.max_model_len or self.limits.pool_pages * self.limits.page_size


@dataclass(frozen=True)
class ImportReport:
    """What each rule did to the trace."""

    rows: int
    kept: int
    failed_lines: tuple[int, ...]
    """The first rows dropped as failed (no output token), by line."""
    failed: int
    beyond: int
    """Usable rows left out past ``max_requests``."""
    clipped: int
    clipped_prompt: int
    clipped_output: int
    shared: int
    """Requests in a prefix group."""
    groups: int
    span: Decimal
    """Seconds from the first kept arrival to the last, on the trace's clock."""
    last_arrival: int

    def lines(self) -> list[str]:
        shown = ", ".join(str(n) for n in self.failed_lines)
        more = ", ..." if self.failed > len(self.failed_lines) else ""
        return [
            f"{plural(self.rows, 'row')} read, {plural(self.kept, 'request')} kept",
            f"{plural(self.failed, 'failed row')} dropped (no output token)"
            + (f": lines {shown}{more}" if self.failed else ""),
            f"{plural(self.beyond, 'row')} left out past --max-requests",
            f"{plural(self.clipped, 'request')} clipped to --max-model-len "
            f"({self.clipped_prompt} prompt and {self.clipped_output} output tokens cut)",
            f"{plural(self.shared, 'request')} in {plural(self.groups, 'prefix group')}",
            f"arrivals span {self.span:.3f} s of the trace, iterations 0..{self.last_arrival}",
        ]


def import_trace(
    layout_name: str, path: str | Path, options: ImportOptions | None = None
) -> tuple[Workload, ImportReport]:
    """The workload the rules make of the trace at ``path``; TraceError for an unusable row."""
    options = options or ImportOptions()
    layout = layout_named(layout_name)
    path = Path(path)
    timed = options.poisson is None
    tally = _Tally()
    rows = tally.usable(read_rows(layout, path, timed, options.block_tokens))
    if timed:
        kept = _earliest(rows, options.max_requests)
    else:
        kept = [row for _, row in zip(range(options.max_requests), rows, strict=False)]
        kept = list(_poisson(kept, options))
    for _ in rows:  # the rows past the kept ones are still read: a bad one is still an error
        pass
    if not kept:
        raise TraceError(f"{path}: no usable row ({tally.rows} rows, {tally.failed} failed)")
    requests, clipped = _requests(kept, layout, path, options, timed)
    report = ImportReport(
        rows=tally.rows,
        kept=len(requests),
        failed_lines=tuple(tally.failed_lines),
        failed=tally.failed,
        beyond=tally.rows - tally.failed - len(kept),
        clipped=clipped[0],
        clipped_prompt=clipped[1],
        clipped_output=clipped[2],
        shared=sum(1 for r in requests if r.prefix_group),
        groups=len({r.prefix_group for r in requests if r.prefix_group}),
        span=_seconds(kept[-1]) - _seconds(kept[0]),
        last_arrival=requests[-1].arrival,
    )
    workload = Workload(
        name=options.name or path.stem,
        limits=options.limits,
        requests=tuple(requests),
        description=f"kvsched import {layout.name} {path.name}: " + "; ".join(report.lines()),
    )
    try:  # the loader's rules hold by construction; a breach is kvsched's bug, not the trace's
        parse_workload(workload_to_json(workload), source=str(path))
    except WorkloadError as error:
        raise RuntimeError(f"kvsched made a workload its own loader rejects: {error}") from None
    return workload, report


class _Tally:
    def __init__(self) -> None:
        self.rows = self.failed = 0
        self.failed_lines: list[int] = []

    def usable(self, rows: Iterable[TraceRow]) -> Iterator[TraceRow]:
        for row in rows:
            self.rows += 1
            if row.output_tokens == 0:
                self.failed += 1
                if len(self.failed_lines) < SHOWN_LINES:
                    self.failed_lines.append(row.line)
                continue
            yield row


def _earliest(rows: Iterator[TraceRow], keep: int) -> list[TraceRow]:
    """The ``keep`` earliest rows by (arrival, line), sorted, in the memory of ``keep`` rows:
    a trace need not be sorted (Mooncake's are not)."""
    heap: list[tuple[Decimal, int, TraceRow]] = []  # the latest kept row on top
    for row in rows:
        entry = (-_seconds(row), -row.line, row)
        if len(heap) < keep:
            heapq.heappush(heap, entry)
        elif entry > heap[0]:
            heapq.heapreplace(heap, entry)
    return [row for _, _, row in sorted(heap, reverse=True)]


def _seconds(row: TraceRow) -> Decimal:
    assert row.seconds is not None, "a timed import reads every row's time"
    return row.seconds


def _poisson(rows: list[TraceRow], options: ImportOptions) -> Iterator[TraceRow]:
    """Rows in file order at the times of a Poisson process of ``options.poisson`` per second.

    Gaps are ``-ln(1 - u) / rate``, taken in decimal arithmetic, whose logarithm is correctly
    rounded: the same seed gives the same arrivals on every machine.
    """
    assert options.poisson is not None
    rng = random.Random(f"kvsched-import/{options.seed}")
    time = Decimal(0)
    for row in rows:
        yield TraceRow(row.line, time, row.prompt_tokens, row.output_tokens, row.blocks)
        time += -(1 - Decimal(rng.random())).ln() / options.poisson


def _requests(
    rows: list[TraceRow], layout: Layout, path: Path, options: ImportOptions, timed: bool
) -> tuple[list[Request], tuple[int, int, int]]:
    first = _seconds(rows[0])
    # Compared before dividing, so that the quotient is small and exact whatever the options.
    # rate r shortens every gap r times: an iteration spans arrival_scale * r seconds of trace.
    per_iteration = options.arrival_scale * options.rate
    too_late = per_iteration * (MAX_ARRIVAL + 1)
    model_len = options.model_len()
    groups = [("", 0)] * len(rows)
    if layout.blocks:
        groups = shared_prefixes(
            [r.blocks for r in rows], [r.prompt_tokens for r in rows], options.block_tokens
        )
    requests: list[Request] = []
    clipped = prompt_cut = output_cut = 0
    for row, (group, shared) in zip(rows, groups, strict=True):
        elapsed = _seconds(row) - first
        if elapsed >= too_late:
            where = f"{path}, line {row.line}, column '{layout.time}'" if timed else "--poisson"
            raise TraceError(
                f"{where}: arrives {elapsed} s after the first request, past "
                f"iteration {MAX_ARRIVAL} where a workload's arrivals end (at --arrival-scale "
                f"{options.arrival_scale} s and --rate {options.rate}); raise --arrival-scale, "
                "or keep fewer rows with --max-requests"
            )
        arrival = int(elapsed // per_iteration)
        output = min(row.output_tokens, MAX_OUTPUT_TOKENS, model_len)
        prompt = min(row.prompt_tokens, MAX_PROMPT_TOKENS, model_len - output)
        if (prompt, output) != (row.prompt_tokens, row.output_tokens):
            clipped += 1
            prompt_cut += row.prompt_tokens - prompt
            output_cut += row.output_tokens - output
        shared = min(shared, prompt)  # a prompt is cut at its end: its leading tokens stay
        requests.append(
            Request(
                f"L{row.line}",
                arrival,
                prompt,
                output,
                prefix_group=group if shared else "",
                prefix_tokens=shared if shared else 0,
            )
        )
    return requests, (clipped, prompt_cut, output_cut)
