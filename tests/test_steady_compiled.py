"""Which fast path the tests ran against: the plain modules, or those setup.py compiled with mypyc
(``KVSCHED_MYPYC=1``). tests/test_steady.py runs against whichever is installed; a compiled module
older than its source (an editable install links the sources, which may change after) would have
it test code that is no longer the source."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from kvsched.checks import eventlog

COMPILED = ("steady", "steady_lazy", "steady_ops", "steady_recent")
SHARED = "kvsched_steady__mypyc"
"""mypyc's library of the compiled group, which holds their code (setup.py's group_name)."""


def compiled() -> dict[str, bool]:
    """Whether each module of the fast path was imported compiled."""
    kinds = {}
    for name in COMPILED:
        module = importlib.import_module(f"{eventlog.__name__}.{name}")
        kinds[name] = str(module.__file__).endswith(".so")
    return kinds


def test_the_fast_path_is_all_compiled_or_all_plain() -> None:
    assert len(set(compiled().values())) == 1, compiled()


def test_a_compiled_module_is_no_older_than_its_source() -> None:
    if not all(compiled().values()):
        return
    folder = Path(str(eventlog.__file__)).parent
    built = [*folder.glob("steady*.so"), Path(str(sys.modules[SHARED].__file__))]
    oldest = min(path.stat().st_mtime for path in built)
    for name in COMPILED:
        source = folder / f"{name}.py"
        if not source.is_symlink():
            continue  # a regular install: both came out of one wheel, written in any order
        assert source.stat().st_mtime <= oldest, (
            f"{source.resolve()} changed after it was compiled: run the install again (setup.py)"
        )
