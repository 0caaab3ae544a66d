"""``kvsched replay --design NAME``: the engine scheduler as designed, a column of the table,
from its batched replay where exact; the same figures as its stepped loop."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

WORKLOAD = "family:poisson-long-roomy:150:4"


def _replay(*extra: str) -> dict[str, dict[str, object]]:
    command = [sys.executable, "-m", "kvsched", "replay", WORKLOAD, "--format", "json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    figures: dict[str, dict[str, object]] = json.loads(done.stdout)
    return figures


@pytest.mark.parametrize("design", ["vllm-v1", "nano"])
def test_a_design_replays_as_its_stepped_loop(design: str) -> None:
    fast = _replay("--design", design)
    stepped = _replay("--design", design, "--engine", "stepped")
    assert list(fast) == ["static", "continuous", design]
    assert fast == stepped


@pytest.mark.parametrize("design", ["static", "continuous"])
def test_a_design_named_as_a_lesson_policy_gets_a_column_of_its_own(design: str) -> None:
    figures = _replay("--design", design)
    assert list(figures) == ["static", "continuous", f"{design} (engine)"]
    lesson = _replay()
    assert figures[design] == lesson[design]  # the lesson's column is the lesson's figures


def test_an_unknown_design_is_refused_with_the_names() -> None:
    command = [sys.executable, "-m", "kvsched", "replay", WORKLOAD, "--design", "sglang"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 2
    assert "vllm-v1" in done.stderr
