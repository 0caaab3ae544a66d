"""The recorders ``kvsched record`` knows, by engine name (spec/vocabulary.py's ``Engine``)."""

from __future__ import annotations

from pathlib import Path

from kvsched.checks.eventlog.writer import LogWriter
from kvsched.checks.record import nanovllm, sglang, vllm
from kvsched.checks.record.base import Recorder, RecordOptions
from kvsched.spec.vocabulary import Engine
from kvsched.spec.workload import Workload

RECORDERS: dict[Engine, Recorder] = {
    "vllm": Recorder("vllm", vllm.properties, vllm.record),
    "nanovllm": Recorder("nanovllm", nanovllm.properties, nanovllm.record),
    "sglang": Recorder("sglang", sglang.properties, sglang.record),
}


def record_log(engine: Engine, workload: Workload, out: Path, options: RecordOptions) -> int:
    """Record ``workload`` on ``engine`` into the log ``out``; the number of iterations."""
    recorder = RECORDERS[engine]
    declared = recorder.properties(workload, options)
    with LogWriter(out, workload, declared) as writer:
        recorder.record(workload, writer, options)
        return writer.iterations
