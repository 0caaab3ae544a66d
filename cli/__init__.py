"""kvsched: verify and benchmark the schedulers of LLM-serving engines.

The root imports nothing of its own at start-up, so ``import kvsched.spec`` loads only the spec;
the exercise's ``allocate_kv_pages`` is still reachable as ``kvsched.allocate_kv_pages``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "allocate_kv_pages"]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one home for the version: pyproject.toml, as installed
        from importlib.metadata import version

        return version("kvsched")
    if name == "allocate_kv_pages":
        from kvsched.reference.pages import allocate_kv_pages

        return allocate_kv_pages
    raise AttributeError(f"module 'kvsched' has no attribute {name!r}")
