"""Tiny sweep grids for the sweep's tests: the machine is shared, so each cell is a few dozen
requests."""

from __future__ import annotations

from pathlib import Path

GRID_2X2X2 = """\
# 2 schedulers x 2 families x 2 seeds
policies = ["static"]
configs = ["vllm-v1"]
seeds = [0, 1]

[[families]]
name = "bursty-short-tight"
size = 24

[[families]]
name = "poisson-short-roomy"
size = 16
"""


def write_grid(folder: Path, text: str = GRID_2X2X2, name: str = "grid.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
