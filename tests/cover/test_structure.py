"""The shape of the code base: rooms of readable size, one vocabulary, a spec that stands alone.

The layer order itself (spec <- reference <- checks <- reports, benchmarks <- cli, and the rooms
of checks/) is import-linter's job: `lint-imports` runs in CI with the contracts in
pyproject.toml.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvsched.checks.search.profiles import PROFILE_SETTINGS
from kvsched.reference import POLICIES
from kvsched.spec.vocabulary import POLICY_NAMES, PROFILE_NAMES

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("spec", "reference", "checks", "reports", "cli", "benchmarks", "tests")


def test_importing_the_spec_loads_nothing_else_of_kvsched() -> None:
    code = (
        "import sys, pkgutil, importlib, kvsched.spec as spec\n"
        "for m in pkgutil.iter_modules(spec.__path__):\n"
        "    importlib.import_module(f'kvsched.spec.{m.name}')\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kvsched'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded, "the probe imported nothing"
    assert [m for m in loaded if m not in ("kvsched", "kvsched.spec")] == [
        m for m in loaded if m.startswith("kvsched.spec.")
    ], loaded


def test_a_log_check_imports_neither_hypothesis_nor_rich_nor_z3() -> None:
    """A recording runs no search, draws nothing and proves nothing: its check loads none of
    them (about 0.8 s of imports on a busy machine, more than many logs take to check)."""
    log = ROOT / "tests" / "logs" / "nano_like.clean.jsonl"
    code = (
        "import sys\n"
        "from kvsched.cli import main\n"
        f"code = main(['check', {str(log)!r}, '--json'])\n"
        "heavy = {m.partition('.')[0] for m in sys.modules} & {'hypothesis', 'rich', 'z3'}\n"
        "print(code, ' '.join(sorted(heavy)), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stderr.split() == ["0"], result.stderr


def test_one_vocabulary_for_policies_and_profiles() -> None:
    assert tuple(POLICIES) == POLICY_NAMES
    assert tuple(PROFILE_SETTINGS) == PROFILE_NAMES


@pytest.mark.parametrize("folder", SOURCE_FOLDERS)
def test_code_and_docs_speak_of_the_project_only(folder: str) -> None:
    """Comments and docstrings cite the spec, never a tracker's issue numbers nor notes kept
    outside the repository."""
    citing = re.compile(
        r"\b[Ii]ssue \d|\bissue #\d|prior-art|engine-semantics|style-anchors|\blesson\.md"
    )
    files = [*(ROOT / folder).rglob("*.py"), *(ROOT / folder).rglob("*.md")]
    this = Path(__file__).resolve()  # the one file that must spell the patterns out
    found = [
        str(p.relative_to(ROOT))
        for p in files
        if p.resolve() != this and citing.search(p.read_text("utf-8"))
    ]
    assert not found, f"files citing issue numbers or files outside the repository: {found}"
