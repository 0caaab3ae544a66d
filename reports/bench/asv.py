"""asv, driven offline in this Python environment: its configuration, runs and comparison.

With asv 0.6 and no network, ``asv continuous`` cannot compare two commits (it refuses an
existing environment), so each commit is run with ``asv run --python=same
--set-commit-hash=COMMIT`` and ``ASV_PYTHONPATH`` at that commit's kvsched (asv drops
``PYTHONPATH``). The suite run on both is the candidate's ``benchmarks/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kvsched.checks.verdict.files import write_file
from kvsched.reports.bench.checkout import Export

MACHINE = "kvsched-bench"


class AsvError(Exception):
    """asv itself failed (not a benchmark: asv saves and compares those)."""


def asv_config(work: Path, clone: Path, candidate: Export, results: Path) -> Path:
    """The candidate's asv.conf.json, pointed at the clone and the candidate's benchmarks."""
    source = candidate.source
    lines = (source / "asv.conf.json").read_text(encoding="utf-8").splitlines()
    config = json.loads("\n".join(line for line in lines if not line.lstrip().startswith("//")))
    config.update(
        repo=str(clone),
        benchmark_dir=str(source / config.get("benchmark_dir", "benchmarks")),
        results_dir=str(results),
        html_dir=str(work / "html"),
        env_dir=str(work / "env"),
        branches=["HEAD"],
    )
    path = work / "asv.conf.json"
    write_file(path, json.dumps(config, indent=2))
    return path


def register_machine(config: Path) -> None:
    asv(config, "machine", "--yes", "--machine", MACHINE)


def run_suite(config: Path, commit: str, site: Path, selection: list[str], quick: bool) -> None:
    """Run the selected benchmarks against the kvsched laid out at ``site``."""
    arguments = ["run", "--python=same", f"--set-commit-hash={commit}", "--machine", MACHINE]
    arguments += ["--quick"] if quick else []
    for regex in selection:
        arguments += ["--bench", regex]
    # asv exits 2 when some benchmarks failed: their results are saved and compare shows them.
    asv(config, *arguments, pythonpath=site, accept=(0, 2))


def compare(config: Path, base: str, candidate: str, factor: float) -> str:
    """``asv compare --split``'s tables (it always exits 0: read the table, not the code)."""
    arguments = ["compare", "--split", "--machine", MACHINE, base, candidate]
    return asv(config, *arguments, f"--factor={factor}")


def asv(
    config: Path, *arguments: str, pythonpath: Path | None = None, accept: tuple[int, ...] = (0,)
) -> str:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["ASV_PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, "-m", "asv", arguments[0], "--config", str(config), *arguments[1:]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in accept:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise AsvError(f"asv {arguments[0]} exited {done.returncode}:\n{tail}")
    return done.stdout
