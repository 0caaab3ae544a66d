"""Read asv results (asv 0.6, results format version 2) into a :class:`~.results.ResultSet`.

An asv results tree is ``RESULTS/benchmarks.json`` (what each benchmark is: its parameter names
and unit) plus ``RESULTS/MACHINE/COMMIT-ENV.json`` per run. A run file stores, per benchmark,
a row of columns named by ``result_columns``; the ``result`` column holds one value per
combination of parameters, in the order of ``itertools.product(*params)``.

Each value becomes one metric of one case; a value asv recorded as failed (None) is kept as
such, so that a benchmark that crashes cannot slip through the gate. The metric is the
benchmark's method name, less the ``track_`` prefix for tracked figures (``track_p95_wait`` ->
``p95_wait``, so a gate reads the same names as for a report run); ``time_*`` and ``peakmem_*``
keep their names. A parameter named ``policy`` becomes the case's policy; the benchmark's class
path and its other parameters name the workload. This module reads the JSON itself rather than
asv's internal API, which changes between asv versions more than the file format does.
"""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path
from typing import Any

from .results import CaseResult, ResultsError, ResultSet, load_json_object

_NOT_RUNS = {"machine.json", "benchmarks.json"}


def is_asv_results(path: Path) -> bool:
    """Whether ``path`` looks like an asv results tree, machine folder or run file."""
    if path.is_file():
        return "result_columns" in load_json_object(path)
    return (path / "benchmarks.json").is_file() or (path / "machine.json").is_file()


def read_asv_results(path: Path, commit: str = "") -> ResultSet:
    """The figures of one asv run: ``path`` is a run file, or a tree holding exactly one run
    (after keeping the runs whose commit hash starts with ``commit``)."""
    run_file = path if path.is_file() else _choose_run(path, commit)
    run = load_json_object(run_file)
    for name in ("commit_hash", "result_columns", "results"):
        if name not in run:
            raise ResultsError(f"{run_file}: not an asv results file (no field '{name}')")
    if commit and not str(run["commit_hash"]).startswith(commit):
        raise ResultsError(f"{run_file}: holds commit {run['commit_hash']}, not {commit}")
    columns = run["result_columns"]
    if not isinstance(columns, list) or "result" not in columns or "params" not in columns:
        raise ResultsError(f"{run_file}: field 'result_columns' lacks 'result' or 'params'")
    described = _benchmarks_json(run_file)
    grouped: dict[tuple[str, str], dict[str, float]] = {}
    units: dict[tuple[str, str], dict[str, str]] = {}
    failed: list[tuple[str, str, str]] = []
    for name in sorted(run["results"]):
        row = run["results"][name]
        if not isinstance(row, list):
            raise ResultsError(f"{run_file}: results['{name}'] must be an array")
        row = row + [None] * (len(columns) - len(row))
        values = row[columns.index("result")]
        params = row[columns.index("params")] or []
        info = described.get(name, {})
        owner, _, method = name.rpartition(".")
        metric = method.removeprefix("track_")
        combinations = list(itertools.product(*params))
        if values is None:  # asv stores a bare None when every combination failed
            values = [None] * len(combinations)
        for combination, value in zip(combinations, values, strict=False):
            key = _case_key(owner, info.get("param_names", []), combination)
            if value is None:
                failed.append((*key, metric))  # the benchmark raised: a gate must not pass it
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                continue  # NaN: asv skipped the combination on purpose
            grouped.setdefault(key, {})[metric] = value
            if isinstance(info.get("unit"), str):
                units.setdefault(key, {})[metric] = info["unit"]
    machine = (
        run.get("params", {}).get("machine", "?") if isinstance(run.get("params"), dict) else "?"
    )
    source = (
        f"asv results of commit {str(run['commit_hash'])[:10]} on machine '{machine}' "
        f"({run_file.name})"
    )
    cases = tuple(
        CaseResult(workload, policy, metrics, units.get((workload, policy), {}))
        for (workload, policy), metrics in grouped.items()
    )
    return ResultSet(source=source, cases=cases, failed=tuple(failed))


def _case_key(owner: str, param_names: list[str], combination: tuple[Any, ...]) -> tuple[str, str]:
    policy = ""
    others = []
    for index, raw in enumerate(combination):
        value = _param_value(raw)
        name = param_names[index] if index < len(param_names) else f"param{index + 1}"
        if name == "policy":
            policy = value
        else:
            others.append(f"{name}={value}")
    workload = f"{owner}({', '.join(others)})" if others else owner
    return (workload, policy)


def _param_value(raw: Any) -> str:
    # asv stores parameter values as their repr(): "'static'" for the string static.
    try:
        value = ast.literal_eval(raw) if isinstance(raw, str) else raw
    except (ValueError, SyntaxError):
        value = raw
    return str(value)


def _choose_run(folder: Path, commit: str) -> Path:
    if not folder.is_dir():
        raise ResultsError(f"{folder}: no such asv results file or folder")
    runs = []
    for path in sorted(folder.rglob("*.json")):
        if path.name in _NOT_RUNS:
            continue
        document = load_json_object(path)
        if "result_columns" in document and str(document.get("commit_hash", "")).startswith(commit):
            runs.append(path)
    if not runs:
        wanted = f" for commit {commit}" if commit else ""
        raise ResultsError(f"{folder}: no asv run files{wanted}")
    if len(runs) > 1:
        listed = ", ".join(str(path.relative_to(folder)) for path in runs[:6])
        raise ResultsError(
            f"{folder}: holds {len(runs)} asv runs ({listed}); choose one with "
            f"{folder}@COMMIT or name the run file itself"
        )
    return runs[0]


def _benchmarks_json(run_file: Path) -> dict[str, Any]:
    """benchmarks.json of the tree a run file lives in (one folder up), or nothing."""
    for folder in (run_file.parent.parent, run_file.parent):
        candidate = folder / "benchmarks.json"
        if candidate.is_file():
            described = load_json_object(candidate)
            return {k: v for k, v in described.items() if isinstance(v, dict)}
    return {}
