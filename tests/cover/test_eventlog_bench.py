"""The log-reading benchmarks' own code on a short log: the logs they write check clean, every
mode of benchmarks/read_log.py reads every iteration, benchmarks/line_kinds.py times every line
once, and the asv figures come out (the engine scheduler's log preempts, and the fast path
takes most of its lines, with the full path's findings and figures).

``benchmarks`` is asv's folder, not part of the installed package, so it runs here as asv and a
reader run it: in a Python started in the project's root.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from kvsched.checks.eventlog.log_check import check_stream

ROOT = Path(__file__).resolve().parents[2]
MODES = ("decode", "stream", "read", "check", "full", "monitor")

SCRIPT = """
import contextlib, io, json, sys
from pathlib import Path
from benchmarks import line_kinds, read_log
from benchmarks.eventlog import EngineLogCheck, EventLogCheck, LongLogCheck
from benchmarks.logs import write_engine_log, write_logs, write_long_log

folder = Path(sys.argv[1])
write_logs(folder, 600)
out = {}
for mode in sys.argv[2:]:
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        read_log.main(str(folder / "v2.jsonl.gz"), mode)
    out[mode] = printed.getvalue()
with contextlib.redirect_stdout(io.StringIO()) as printed:
    line_kinds.main(str(folder / "v2.jsonl"))
out["kinds"] = printed.getvalue()
bench = EventLogCheck()
out["ips"] = bench.track_iterations_per_second(str(folder), "v2.jsonl")
out["share"] = bench.track_fast_share(str(folder), "v2.jsonl.gz")
out["ratio"] = bench.track_ratio_to_monitor(str(folder), "v2.jsonl")
engine = write_engine_log(folder / "engine.jsonl", 400)
out["engine"] = EngineLogCheck().track_iterations_per_second(str(engine))
long = write_long_log(folder / "long.jsonl.gz", 2000)
out["long"] = LongLogCheck().track_seconds(str(long))
print(json.dumps(out))
"""


def test_the_benchmark_logs_and_figures(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), *MODES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    checked = {name: check_stream(tmp_path / name) for name in ("v1.jsonl", "v2.jsonl")}
    assert all(c.finding is None for c in checked.values()), checked
    iterations = checked["v1.jsonl"].iterations
    assert checked["v2.jsonl"].iterations == iterations
    assert checked["v2.jsonl"].fast_lines == iterations
    assert checked["v1.jsonl"].efficiency == checked["v2.jsonl"].efficiency
    for mode in MODES:
        assert figures[mode].startswith(f"{mode}: {iterations} iterations, "), figures[mode]
    assert figures["ips"] > 0 and figures["ratio"] > 0
    assert figures["share"] == 1.0
    kinds = {row.split()[0]: int(row.split()[1]) for row in figures["kinds"].splitlines()[1:]}
    assert kinds.keys() == {"admit", "decode-changed", "decode-only", "finish"}, figures["kinds"]
    assert sum(kinds.values()) == iterations  # every line timed, once
    engine = check_stream(tmp_path / "engine.jsonl", all_findings=True)
    assert engine.finding is None, (engine.finding, engine.later)
    assert engine.fast_lines > engine.iterations // 2 and figures["engine"] > 0
    assert engine.efficiency is not None and engine.efficiency.preemptions > 0
    full = check_stream(tmp_path / "engine.jsonl", all_findings=True, fast=False)
    assert replace(engine, fast_lines=0) == full
    long = check_stream(tmp_path / "long.jsonl.gz", all_findings=True)
    assert long.finding is None and long.iterations >= 2000 and figures["long"] > 0
    with gzip.open(tmp_path / "long.jsonl.gz", "rt") as lines:
        assert json.loads(next(lines))["requests"] == "lines"
