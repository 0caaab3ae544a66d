"""The event-log checker's fast path compiled with mypyc, on request; else plain Python.

``KVSCHED_MYPYC=1`` asks a build to compile the modules of :data:`COMPILED` with mypyc (it ships
with mypy, a dev dependency, so the build runs in the dev environment: ``--no-build-isolation``).
The modules stay in the package as Python; each compiled one is installed beside its source and
imported in its place. A build that cannot compile (no mypyc, a type error, no C compiler) says
so and installs the plain modules, which give the same verdicts: tests/test_steady.py runs against
whichever is installed, says which, and fails if a compiled module is older than its source
(an editable install keeps the compiled modules until it is run again). Everything else is
declared in pyproject.toml.

mypyc names modules by the folders they sit in, and this project maps its folders onto one import
package (pyproject's package-dir), so the sources are first copied into a ``kvsched/`` tree.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

COMPILED = (
    "checks/eventlog/steady.py",
    "checks/eventlog/steady_lazy.py",
    "checks/eventlog/steady_ops.py",
    "checks/eventlog/steady_recent.py",
)
# Only a command that builds a wheel compiles: metadata and sdists need no compiler.
BUILDS = {"bdist_wheel", "editable_wheel", "build_ext", "build", "develop", "install"}
TREE = Path("build", "mypyc-src")
ROOTS = {"kvsched": "cli", "checks": "checks", "spec": "spec", "reference": "reference"}


def _forget_compiled() -> None:
    """A plain build removes what an earlier compiled one left beside the sources, which an
    editable install would otherwise go on linking (and Python importing) in their place."""
    for source in COMPILED:
        for built in Path(source).parent.glob(Path(source).stem + ".*.so"):
            built.unlink()
    for built in Path().glob("kvsched_steady__mypyc.*.so"):
        built.unlink()


def _staged() -> Path:
    """The sources mypy reads, as the package they install to (reports/ is not imported)."""
    shutil.rmtree(TREE, ignore_errors=True)
    package = TREE / "kvsched"
    skip = shutil.ignore_patterns("__pycache__", "*.so")
    shutil.copytree(ROOTS["kvsched"], package, ignore=skip)
    for name, folder in ROOTS.items():
        if name != "kvsched":
            shutil.copytree(folder, package / name, ignore=skip)
    return package


def extensions() -> list[object]:
    if not BUILDS & set(sys.argv[1:]):
        return []
    if os.environ.get("KVSCHED_MYPYC") != "1":
        _forget_compiled()
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("kvsched: mypyc not found; the fast path stays plain Python", file=sys.stderr)
        return []
    # Asked before compiling: an extension that fails to build (even one marked optional) breaks
    # an editable install, which still expects its file.
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        print(f"kvsched: no C compiler ({compiler}); the fast path stays plain", file=sys.stderr)
        return []
    package = _staged()
    paths = [str(package / path) for path in COMPILED]
    try:
        built = mypycify(
            [*paths, "--config-file=", "--ignore-missing-imports"],
            group_name="kvsched_steady",
        )
    except (Exception, SystemExit) as error:  # mypy exits on a type error
        print(f"kvsched: mypyc failed ({error}); the fast path stays plain", file=sys.stderr)
        return []
    return list(built)


setup(ext_modules=extensions())
