"""What kvsched reads of a target without running it: its kind, and a learner's functions.

The target's own process can say anything: code the target runs at import can write on the
host's wire what the host would write (docs/grading.md). So nothing that decides *what is
judged* comes from there. The kind of a target follows from the command line alone (its form,
read by :func:`~.load.target_kind` and checked here against the grader's ``--expect``); the
functions a learner's file defines are read off
its syntax tree, without importing it. The host only runs the calls kvsched then makes, and an
answer that contradicts what was read here is a PROTO-1 finding, never a description.
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import sys
from pathlib import Path

from kvsched.checks.targets.learner import LEARNER_FUNCTIONS, LearnerFunction
from kvsched.checks.targets.load import Kind, TargetError, target_kind
from kvsched.spec.vocabulary import Expected

EXPECTED: dict[Expected, Kind] = {
    "scheduler": "scheduler",
    "learner": "learner",
    "log": "event log",
}
"""The kind each of ``--expect``'s words asks for."""


def expect(spec: str, expected: Expected | None) -> Kind:
    """TARGET's kind, refused (exit 2) where the grader's ``--expect`` names another one."""
    kind = target_kind(spec)
    if expected is not None and EXPECTED[expected] != kind:
        forms = {
            "scheduler": "package.module:Class or path/to/file.py:Class",
            "learner": "path/to/solution.py or package.module",
            "event log": "path/to/run.jsonl, run.jsonl.gz or -",
        }
        wanted = EXPECTED[expected]
        raise TargetError(
            f"{spec}: --expect {expected} wants a {wanted} ({forms[wanted]}), but this target "
            f"names a {kind}"
        )
    return kind


def defined_functions(spec: str) -> tuple[LearnerFunction, ...] | None:
    """The exercise's functions a learner's module binds at its top level, read off its source;
    None where the source cannot be found or read without running anything (then every
    function is asked for, and each call shows whether it is there)."""
    source = _source_file(spec.rpartition(":")[0] if ":" in spec else spec)
    if source is None:
        return None
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (OSError, ValueError, SyntaxError):  # the import reports a syntax error itself
        return None
    bound = _top_level_names(tree.body)
    return tuple(name for name in LEARNER_FUNCTIONS if name in bound)


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    """Names a module's top level binds: definitions, assignments and imports, also inside
    ``if``/``try`` blocks there (a fallback definition is still a definition)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(node, block, []):
                    inner_body = inner.body if isinstance(inner, ast.ExceptHandler) else [inner]
                    names |= _top_level_names(inner_body)
    return names


def _source_file(where: str) -> Path | None:
    """The Python source ``where`` (a path or a dotted module name) names, found the way
    ``kvsched check`` imports it, without importing anything: no package's ``__init__`` runs."""
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where)
        return path if path.is_file() else None
    parts = where.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    search: list[str] | None = [os.getcwd(), *sys.path]
    spec = None
    for part in parts:
        spec = importlib.machinery.PathFinder.find_spec(part, search)
        if spec is None:
            return None
        search = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)
