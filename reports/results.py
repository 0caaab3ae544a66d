"""A report's machine-readable results: the figures per (workload, policy), as ``results.json``.

Every report writes ``results.json`` beside ``report.md``; a later report reads it back as its
baseline (:mod:`.compare`). asv results are read into the same shape by :mod:`.asv_results`, so
the comparison and the gate do not care where the figures came from.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .provenance import Provenance, provenance_from_json

RESULTS_FORMAT = 1
RESULTS_KIND = "kvsched-report-results"


class ResultsError(ValueError):
    """A baseline or asv results file cannot be read; the message names the file and field."""


@dataclass(frozen=True)
class CaseResult:
    """The scalar figures of one workload under one policy."""

    workload: str
    policy: str
    metrics: Mapping[str, float]
    """Metric name -> value, in a fixed order (the order of ``RunMetrics`` or of the asv file)."""
    units: Mapping[str, str] = field(default_factory=dict)
    """Metric name -> unit, where one is known ("iterations", "seconds", ...)."""
    content: str = ""
    """A digest of the workload's requests (:func:`workload_content`); empty when unknown (asv)."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """The workload's limits by name; empty when unknown."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload, self.policy)

    @property
    def label(self) -> str:
        return f"{self.workload} / {self.policy}" if self.policy else self.workload


@dataclass(frozen=True)
class ResultSet:
    """Figures from one source: a run of the reference engine, a results.json, or asv results."""

    source: str
    """Where the figures come from, in words, for the report ("reference engine", "asv ...")."""
    cases: tuple[CaseResult, ...]
    failed: tuple[tuple[str, str, str], ...] = ()
    """(workload, policy, metric) the source has no value for because its benchmark failed."""
    provenance: Provenance | None = None
    """Which code made the figures, and when; None when the source did not record it."""

    def case(self, key: tuple[str, str]) -> CaseResult | None:
        for case in self.cases:
            if case.key == key:
                return case
        return None

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Every metric some case reports, first-seen order."""
        names: dict[str, None] = {}
        for case in self.cases:
            names.update(dict.fromkeys(case.metrics))
        return tuple(names)


RUN_METRIC_UNITS = {
    "iterations": "iterations",
    "busy_iterations": "iterations",
    "tokens": "tokens",
    "utilization": "fraction",
    "p50_wait": "iterations",
    "p95_wait": "iterations",
    "max_wait": "iterations",
    "mean_wait": "iterations",
    "peak_pages": "pages",
    "peak_wasted_slots": "slots",
    "mean_wasted_slots": "slots",
}
"""The scalar metrics of spec/semantics.md section 7 (``RunMetrics``) and their units."""

EFFICIENCY_UNITS = {
    "idle_slot_iterations": "slot-iterations",
    "unused_page_iterations": "page-iterations",
    "preemptions": "preemptions",
    "recomputed_tokens": "tokens",
}
"""The efficiency layer's figures (spec/semantics.md section 8, EFF-1..EFF-4) and their units:
measured on every stepped run and reported, never a violation."""


def workload_content(requests: Any) -> str:
    """A digest of a workload's requests (ids, arrivals, lengths, in declared order): two runs
    compare like with like when their digests agree, whatever the workloads are named."""
    text = json.dumps(
        [[r.id, r.arrival, r.prompt_tokens, r.output_tokens] for r in requests],
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def results_to_json(results: ResultSet) -> dict[str, Any]:
    return {
        "format": RESULTS_FORMAT,
        "kind": RESULTS_KIND,
        "source": results.source,
        "cases": [_case_json(case) for case in results.cases],
        "failed": [list(entry) for entry in results.failed],
    } | ({"provenance": results.provenance.as_json()} if results.provenance else {})


def _case_json(case: CaseResult) -> dict[str, Any]:
    document: dict[str, Any] = {"workload": case.workload, "policy": case.policy}
    if case.content:
        document["content"] = case.content
    if case.limits:
        document["limits"] = dict(case.limits)
    return document | {"metrics": dict(case.metrics), "units": dict(case.units)}


def write_results(results: ResultSet, path: Path) -> None:
    # Imported here: the units above are read by `kvsched replay`'s table, which loads none of
    # the checks (about 75 ms of its start-up).
    from kvsched.checks.verdict.files import write_file

    text = json.dumps(results_to_json(results), indent=2, ensure_ascii=False)
    write_file(path, text + "\n")


def read_results(path: Path) -> ResultSet:
    """Read a results.json written by :func:`write_results`; bad files name the field at fault."""
    document = load_json_object(path)
    if document.get("kind") != RESULTS_KIND:
        raise ResultsError(
            f'{path}: not a kvsched report results file (expected "kind": "{RESULTS_KIND}")'
        )
    if document.get("format") != RESULTS_FORMAT:
        raise ResultsError(
            f"{path}: field 'format' must be {RESULTS_FORMAT}, got {document.get('format')!r}"
        )
    raw_cases = document.get("cases")
    if not isinstance(raw_cases, list):
        raise ResultsError(f"{path}: field 'cases' must be an array")
    cases = tuple(_parse_case(raw, f"{path}: case #{index}") for index, raw in enumerate(raw_cases))
    failed = document.get("failed", [])
    if not isinstance(failed, list) or not all(
        isinstance(entry, list) and len(entry) == 3 and all(isinstance(x, str) for x in entry)
        for entry in failed
    ):
        raise ResultsError(f"{path}: field 'failed' must list [workload, policy, metric] triples")
    source = document.get("source")
    return ResultSet(
        source=source if isinstance(source, str) else str(path),
        cases=cases,
        failed=tuple((w, p, m) for w, p, m in failed),
        provenance=provenance_from_json(document.get("provenance")),
    )


def _parse_case(raw: Any, where: str) -> CaseResult:
    if not isinstance(raw, dict):
        raise ResultsError(f"{where}: must be a JSON object")
    for name in ("workload", "policy"):
        if not isinstance(raw.get(name), str):
            raise ResultsError(f"{where}: field '{name}' must be a string")
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict):
        raise ResultsError(f"{where}: field 'metrics' must be a JSON object")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ResultsError(f"{where}: metric '{name}' must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ResultsError(f"{where}: metric '{name}' must be finite, got {value!r}")
    units = raw.get("units", {})
    if not isinstance(units, dict) or not all(isinstance(u, str) for u in units.values()):
        raise ResultsError(f"{where}: field 'units' must map metric names to strings")
    content = raw.get("content", "")
    if not isinstance(content, str):
        raise ResultsError(f"{where}: field 'content' must be a string")
    limits = raw.get("limits", {})
    if not isinstance(limits, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in limits.values()
    ):
        raise ResultsError(f"{where}: field 'limits' must map limit names to integers")
    return CaseResult(raw["workload"], raw["policy"], metrics, units, content, limits)


def load_json_object(path: Path) -> dict[str, Any]:
    """A file holding one JSON object (results.json, asv's files); errors name the file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ResultsError(f"{path}: cannot read ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(document, dict):
        raise ResultsError(f"{path}: must hold a JSON object")
    return document
