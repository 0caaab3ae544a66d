"""kvsched: verify and benchmark the schedulers of LLM-serving engines.

The root imports nothing of its own at start-up, so ``import kvsched.spec`` loads only the spec;
the exercise's ``allocate_kv_pages`` is still reachable as ``kvsched.allocate_kv_pages``.

Under ``python -m kvsched`` the current folder comes first on ``sys.path``: a submission's folder
that ships ``gettext.py`` or ``typing.py`` would run its code inside kvsched, which could forge a
verdict before any sandbox exists. So the root's first act under ``python -m`` is to run the same
command again with the current folder left off the path (``-P``; ``-I`` before Python 3.11),
before it imports anything: hence no ``from __future__ import``, itself an import from that
folder. What ``python -m`` imports before kvsched's first line (``warnings``, ``functools``,
``contextlib`` ..., for runpy) is beyond its reach: docs/grading.md gives the invocations that
are safe from the first line, the ``kvsched`` script and ``python -P -m kvsched``.
"""

import os  # loaded (frozen) by the interpreter's start-up: neither is looked up in the folder
import sys


def _run_isolated() -> None:
    """Re-execute ``python -m kvsched ...`` with the current folder off ``sys.path``, if that is
    how kvsched is being run. ``sys.argv[0]`` is ``-m`` only while runpy imports the package;
    ``sys.orig_argv`` says which module it runs (``python -m other`` whose package imports
    kvsched is left alone), and the interpreter options to keep."""
    if sys.argv[:1] != ["-m"] or sys.flags.isolated or getattr(sys.flags, "safe_path", False):
        return
    original = getattr(sys, "orig_argv", [])
    at = len(original) - len(sys.argv)  # the module's name: what comes before the arguments
    module = original[at] if 0 < at < len(original) else ""
    module = module[2:] if module.startswith("-m") else module  # as in ``python -mkvsched``
    if module != "kvsched" and not module.startswith("kvsched."):
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not sys.executable or here == os.getcwd():  # no interpreter to run, or kvsched's own folder
        return
    # -P (3.11) drops only the current folder; -I, all 3.10 has, also ignores PYTHON* variables
    # and the user's site-packages (the venv's stay).
    safe = "-P" if sys.version_info >= (3, 11) else "-I"
    os.execv(sys.executable, [sys.executable, safe, *original[1:]])


_run_isolated()

from typing import Any  # noqa: E402  (after the re-execution: typing is looked up on the path)

__all__ = ["__version__", "allocate_kv_pages"]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one home for the version: pyproject.toml, as installed
        from importlib.metadata import version

        return version("kvsched")
    if name == "allocate_kv_pages":
        from kvsched.reference.page_count import allocate_kv_pages

        return allocate_kv_pages
    raise AttributeError(f"module 'kvsched' has no attribute {name!r}")
