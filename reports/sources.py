"""Where a baseline's (or an asv candidate's) figures come from, told apart by what is on disk.

``SOURCE`` is one of:

- a report folder written by ``kvsched report`` (it holds ``results.json``), or that file;
- an asv results tree (``.asv/results``), a machine folder in it, or one asv run file, optionally
  followed by ``@COMMIT`` (a hash prefix) to pick one run from a tree holding several.
"""

from __future__ import annotations

import re
from pathlib import Path

from .asv_results import is_asv_results, read_asv_results
from .results import ResultsError, ResultSet, read_results

_COMMIT = re.compile(r"[0-9a-fA-F]{4,40}")


def read_source(spec: str) -> ResultSet:
    """The figures behind ``spec``; a missing or unreadable source raises :class:`ResultsError`."""
    path_text, commit = _split_commit(spec)
    path = Path(path_text)
    if not path.exists():
        raise ResultsError(f"{path}: no such report folder, results.json or asv results")
    if path.is_dir() and (path / "results.json").is_file():
        if commit:
            raise ResultsError(f"{spec}: '@{commit}' selects an asv run; {path} is a report folder")
        return read_results(path / "results.json")
    if is_asv_results(path):
        return read_asv_results(path, commit.lower())
    if path.is_file():
        return read_results(path)
    raise ResultsError(
        f"{path}: neither a report folder (no results.json) nor asv results "
        "(no benchmarks.json or machine.json)"
    )


def _split_commit(spec: str) -> tuple[str, str]:
    """'path@abc123' -> ('path', 'abc123'); an '@' not followed by a hash stays in the path."""
    path, at, commit = spec.rpartition("@")
    if at and path and _COMMIT.fullmatch(commit):
        return path, commit
    return spec, ""
