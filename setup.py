"""kvsched's build: pyproject.toml declares the package; this compiles its hot path with mypyc.

Checking an event log spends nearly all its time in the fast path of checks/eventlog and in the
runtime monitor's ledgers and checks, and a checked run in the monitor (its overhead over the run
is an asv ratio, ``benchmarks/ratios.py``): plain, fully typed Python. mypyc (shipped with mypy)
compiles those modules to C extensions that the interpreter loads in place of the .py files, with
one shared library beside the package (``kvsched_eventlog__mypyc``); the sources stay the one
implementation, and the package runs the same without them, only slower. The compiled modules are
listed in :data:`COMPILED`: each must pass ``mypy --strict``, and none of their classes may be
patched, subclassed or copied at run time, which compiled classes refuse.

``KVSCHED_PURE_PYTHON=1`` builds without compiling. A machine where compiling fails gets the
pure-Python package rather than a failed install: mypy's errors or a missing C compiler are
warnings in pip's output, and tests/cover/test_compiled.py fails where a compiler exists. An
editable install builds the extensions beside their sources, and tests/conftest.py refuses to run
the tests once a source is newer than its extension.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup

if sys.version_info >= (3, 11):
    import tomllib
else:  # a build requirement on 3.10 (pyproject.toml)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent
COMPILED = (
    "checks/eventlog/ids.py",
    "checks/eventlog/lowering.py",
    "checks/eventlog/source.py",
    "checks/eventlog/steady.py",
    "checks/eventlog/steady_lazy.py",
    "checks/eventlog/steady_ops.py",
    "checks/eventlog/steady_pages.py",
    "checks/eventlog/steady_recent.py",
    "checks/eventlog/stream.py",
    "checks/monitor/batch.py",
    "checks/monitor/checklist.py",
    "checks/monitor/checklist_update.py",
    "checks/monitor/liveness.py",
    "checks/monitor/order.py",
    "checks/monitor/pages.py",
    "checks/monitor/prefix.py",
    "checks/monitor/requests.py",
    "checks/monitor/runtime.py",
    "checks/monitor/schedule.py",
    "checks/monitor/steady_line.py",
    "checks/monitor/steady_request.py",
    "checks/monitor/tokens.py",
    "reference/efficiency.py",
    "reference/record.py",
)
"""The modules compiled, as paths in the repository."""
# Not strict: strictness only adds errors, and the build needs the types, not the lint (CI runs
# mypy --strict). Third-party packages the build environment lacks are read as Any.
MYPY_CONFIG = "[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n"


def package_tree(where: Path) -> Path:
    """The package ``kvsched`` laid out at ``where`` as pyproject.toml's ``package-dir`` maps
    folders onto it, in symbolic links, so that mypy names each module by its import path."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        folders: dict[str, str] = tomllib.load(file)["tool"]["setuptools"]["package-dir"]
    if where.exists():
        shutil.rmtree(where)
    for name, folder in sorted(folders.items()):  # a package before its subpackages
        target = where.joinpath(*name.split("."))
        if target.exists():  # a subpackage in its parent's folder: linked with it
            continue
        if name == "kvsched":  # the root: a folder of its own, so that its parent is not cli/
            target.mkdir(parents=True)
            for entry in (ROOT / folder).iterdir():
                (target / entry.name).symlink_to(entry)
        else:
            target.symlink_to(ROOT / folder)
    return where / "kvsched"


def compiled_extensions() -> list[Extension]:
    if os.environ.get("KVSCHED_PURE_PYTHON"):
        return []
    from mypyc.build import mypycify

    work = ROOT / "build" / "mypyc"
    try:
        package = package_tree(work / "src")
        config = work / "mypy.ini"
        config.write_text(MYPY_CONFIG)
        paths = [str(package / path) for path in COMPILED]
        extensions: list[Extension] = mypycify(
            ["--config-file", str(config), *paths],
            opt_level="3",
            target_dir=str(work / "c"),
            group_name="kvsched_eventlog",
        )
    except (OSError, SystemExit) as error:  # mypy prints its errors before it exits
        print(f"kvsched: not compiled ({error!r}); installing pure Python")
        return []
    for extension in extensions:
        extension.optional = True
    return extensions


setup(ext_modules=compiled_extensions())
