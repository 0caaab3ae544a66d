"""The build compiles the event-log checker's fast path (setup.py), and a test run says which
build it tests.

Compiling is optional, so that a machine without a C compiler still installs kvsched: a failed
compile is only a warning in pip's output. These tests make a silent fallback visible where a
compiler is present, and keep setup.py's list honest.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def compiled_paths() -> tuple[str, ...]:
    """setup.py's ``COMPILED``, read without running setup.py."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "COMPILED" for target in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise AssertionError("setup.py names no COMPILED modules")


def module_name(path: str) -> str:
    return "kvsched." + path.removesuffix(".py").replace("/", ".")


def test_every_compiled_module_is_a_module_of_the_package() -> None:
    paths = compiled_paths()
    assert paths, "setup.py compiles nothing"
    for path in paths:
        assert (ROOT / path).is_file(), path
        importlib.import_module(module_name(path))


@pytest.mark.skipif(
    bool(os.environ.get("KVSCHED_PURE_PYTHON")) or shutil.which("cc") is None,
    reason="a pure-Python build: KVSCHED_PURE_PYTHON is set, or there is no C compiler",
)
def test_the_installed_fast_path_is_the_compiled_one() -> None:
    for path in compiled_paths():
        module = importlib.import_module(module_name(path))
        assert module.__file__ is not None
        assert module.__file__.endswith(tuple(EXTENSION_SUFFIXES)), (
            f"{module.__name__} was installed uncompiled ({module.__file__}); read pip's output "
            "for the compile's error, or install with KVSCHED_PURE_PYTHON=1 on purpose"
        )
