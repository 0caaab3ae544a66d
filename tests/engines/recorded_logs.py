"""The recorded logs in tests/logs/: which engine, workload and bug made each, and its verdict.

Regenerate them with ``PYTHONPATH=tests python -m engines.recorded_logs`` from the repository root;
tests/cover/test_eventlog.py checks that the files still equal what the engines write, and that each
checks clean or is flagged with its expected invariant id.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvsched.reference import run
from kvsched.reference.engine import Run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload

from . import nano_like, orca_like, vidur_like, vllm_like

LOGS = Path(__file__).resolve().parent.parent / "logs"


@dataclass(frozen=True)
class Scenario:
    name: str
    expected: str | None
    """The invariant id the monitor must report, or None for a clean log."""
    record: Callable[[], tuple[Run, TargetProperties]]
    version: int = 1

    @property
    def path(self) -> Path:
        return LOGS / f"{self.name}.jsonl"

    def lines(self) -> Iterator[str]:
        """The log's lines, in the scenario's version, without newlines."""
        from kvsched.checks.eventlog.jsonl import log_lines
        from kvsched.checks.eventlog.writer import v2_lines

        recorded, properties = self.record()
        if self.version == 2:
            return v2_lines(recorded, properties)
        return log_lines(recorded, properties)


def _workload(
    name: str, limits: tuple[int, int, int], *requests: tuple[str, int, int, int]
) -> Workload:
    return Workload(name, Limits(*limits), tuple(Request(*r) for r in requests))


# A vLLM-v1-like run with every extension at work: chunked prefill under a budget of 8 tokens,
# prefix hits on a shared 8-token system prompt, preemption and re-admission, mixed iterations,
# block 0 reserved.
VLLM = _workload(
    "vllm-like", (3, 4, 7),
    ("a", 2, 8, 2), ("b", 3, 5, 4), ("c", 0, 12, 2), ("d", 0, 9, 5),
)  # fmt: skip
VLLM_PREFIXES = {"a": ("sys", 8), "b": ("sys", 5), "c": ("sys", 8)}

# nano-vllm-like: prefill-only and decode-only iterations, a preemption in a decode iteration.
NANO = _workload(
    "nano-like", (3, 4, 5),
    ("a", 0, 3, 2), ("b", 2, 8, 3), ("c", 1, 7, 2), ("d", 3, 8, 2),
)  # fmt: skip

# Orca (Max)-style: every admission reserves pages for 16 tokens (4 pages of 4).
ORCA = _workload("orca-like", (2, 4, 9), ("a", 0, 5, 3), ("b", 0, 2, 6), ("c", 1, 9, 2))


# vidur's Sarathi schedules a running request only while a page is free. 'a' holds all 3 pages
# from iteration 2, so in iteration 3 and again in 4 it restarts itself, folding its output into
# its prompt, and is admitted again at once with the pages it released; in iteration 4 that
# recompute of 11 tokens ends with its last token: preempted, admitted and finished in one
# iteration. Version 2 writes the preemption's frees apart from the finish's.
SARATHI = _workload("sarathi-one-iteration", (2, 4, 3), ("a", 0, 8, 4))


def _sarathi() -> tuple[Run, TargetProperties]:
    properties = vidur_like.VidurSarathi.properties
    recorded = run(SARATHI, vidur_like.VidurSarathi, properties.policy, properties=properties)
    return recorded, properties


def _vllm(
    workload: Workload, budget: int, prefixes: dict[str, tuple[str, int]], *bugs: str
) -> Callable[[], tuple[Run, TargetProperties]]:
    def record() -> tuple[Run, TargetProperties]:
        return vllm_like.simulate(workload, budget, prefixes, bugs), vllm_like.properties(budget)

    return record


def _nano() -> tuple[Run, TargetProperties]:
    return nano_like.simulate(NANO, 24), nano_like.properties(24)


def _orca(workload: Workload, *bugs: str) -> Callable[[], tuple[Run, TargetProperties]]:
    def record() -> tuple[Run, TargetProperties]:
        return run(workload, orca_like.scheduler(16, bugs)), orca_like.properties(16)

    return record


SCENARIOS = (
    Scenario("vllm_like.clean", None, _vllm(VLLM, 8, VLLM_PREFIXES)),
    Scenario("nano_like.clean", None, _nano),
    Scenario("orca_like.clean", None, _orca(ORCA)),
    Scenario("vidur_sarathi.preempt_readmit_finish", None, _sarathi, version=2),
    Scenario(
        "vllm_like.leak_on_finish", "PAGE-4",
        _vllm(_workload("leak", (3, 4, 4), ("a", 1, 3, 1), ("b", 0, 6, 1)), 6, {},
              "leak_on_finish"),
    ),
    Scenario(
        "vllm_like.uncapped_prefix_hit", "DEC-3",
        _vllm(
            _workload("full-hit", (2, 4, 4), ("a", 1, 4, 1), ("b", 0, 8, 1)), 5,
            {"a": ("sys", 4), "b": ("sys", 8)}, "uncapped_prefix_hit",
        ),
    ),
    Scenario(
        "vllm_like.short_allocation", "PAGE-1",
        _vllm(_workload("short", (3, 4, 3), ("a", 0, 3, 1)), 7, {}, "short_allocation"),
    ),
    Scenario(
        "vllm_like.strict_fit", "BATCH-3",
        _vllm(_workload("stranded", (2, 4, 3), ("a", 0, 5, 3)), 8, {}, "strict_fit"),
    ),
    Scenario(
        "vllm_like.double_free_shared", "PAGE-3",
        _vllm(
            _workload("double-free", (2, 4, 6), ("a", 1, 5, 1), ("b", 0, 5, 2)), 8,
            {"a": ("sys", 5), "b": ("sys", 5)}, "double_free_shared",
        ),
    ),
    Scenario(
        "vllm_like.ghost_revival", "PAGE-2",
        _vllm(
            _workload("ghost", (3, 4, 5), ("a", 1, 9, 1), ("b", 0, 3, 3)), 6,
            {"a": ("sys", 8)}, "ghost_revival",
        ),
    ),
    Scenario(
        "orca_like.prompt_only_reservation", "PAGE-1",
        _orca(_workload("orca-short", (2, 4, 9), ("a", 0, 5, 6)), "prompt_only_reservation"),
    ),
)  # fmt: skip


def main() -> int:
    LOGS.mkdir(exist_ok=True)
    for scenario in SCENARIOS:
        scenario.path.write_text("".join(line + "\n" for line in scenario.lines()), "utf-8")
        print(f"wrote {scenario.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
