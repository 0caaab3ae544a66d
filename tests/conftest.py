"""Test-suite configuration: the Hypothesis profiles, the ``slow`` marker, and the suite's
folders by purpose.

As in Hypothesis's own repository, tests are split by what they are for: ``tests/cover/`` and
``tests/attacks/`` hold the fast, deterministic ones that a bare ``pytest`` runs (a few minutes on
two cores), with the helpers they share (the planted logs, the engine-like targets) in
``tests/``; ``tests/nocover/`` the slow or solver- and search-heavy ones (Z3's models and proofs,
whole checks of the engine designs, signals sent at every phase); ``tests/quality/`` the
bug-finding claims (the mutant zoo, the search's reach of each corner, planted bugs found and
shrunk). Those two run when named, ``pytest tests/nocover tests/quality``, as CI does in a step
of its own.

The ``ci`` profile (fast, derandomized, no example database; see checks/search/profiles.py) is the
default, so ``pytest`` gives the same verdict on every machine. Choose another with
``pytest --hypothesis-profile=dev`` or ``HYPOTHESIS_PROFILE=thorough pytest``; the command-line
option wins over the environment variable.
"""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import kvsched
from kvsched.checks.search.profiles import DEFAULT_PROFILE, register_profiles

register_profiles()
# Loaded at import, before Hypothesis's pytest plugin configures: its --hypothesis-profile option,
# applied in pytest_configure, then overrides this.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE))


NAMED_ONLY = ("nocover", "quality")
"""The folders a bare ``pytest`` leaves out, and that run when named."""

WHOLE_MODULES = frozenset(
    {"tests/quality/test_search_corners.py", "tests/quality/test_far_axes.py"}
)
"""Modules one xdist worker takes whole, so that their module fixtures (whole searches of a
minute each) run once rather than once on each worker that gets one of their tests."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out :data:`NAMED_ONLY` unless a path was named on the command line."""
    if config.option.file_or_dir or collection_path.name not in NAMED_ONLY:
        return None
    return collection_path.parent == Path(__file__).parent


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two xdist workers per core for ``-n auto`` (pyproject.toml's ``addopts``), not one.

    Most tests wait on processes they start (kvsched itself, a target's host, a sandbox, a
    timeout running out), so one worker per core left the cores idle: on the 2-core machine,
    tests/attacks took 93 s with two workers and 51 s with four, for the same CPU time.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 * (cores or 1)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Load balancing test by test, but :data:`WHOLE_MODULES` each sent to one worker.

    xdist's own ``--dist loadgroup`` keeps a group together by rewriting node ids, which pytest
    9.2 no longer reads (pytest-xdist #1386): the groups were dealt out test by test, and each
    of four workers ran the same search."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeModules(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in WHOLE_MODULES else nodeid

    return WholeModules(config, log)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes seconds rather than milliseconds; deselect with -m 'not slow'"
    )
    # Searches that size their workloads by the profile read it from the environment when their
    # module is collected, which comes after this: the option must reach them too.
    profile = config.getoption("hypothesis_profile", None)
    if profile:
        os.environ["HYPOTHESIS_PROFILE"] = profile
    stale = stale_compiled_modules()
    if stale:
        raise pytest.UsageError(
            f"{', '.join(stale)} changed since the install compiled them (setup.py), so the "
            "tests would run the old code; run the install again (the README's test command), "
            "or install with KVSCHED_PURE_PYTHON=1 to test the sources as they stand"
        )


def stale_compiled_modules() -> list[str]:
    """The installed modules compiled from a source that has changed since (an editable
    install's sources are the repository's files, edited in place)."""
    package = Path(kvsched.__file__).parent
    stale = []
    for suffix in EXTENSION_SUFFIXES:
        for compiled in package.rglob(f"*{suffix}"):
            source = compiled.with_name(compiled.name.removesuffix(suffix) + ".py")
            if source.exists() and source.stat().st_mtime > compiled.stat().st_mtime:
                stale.append(os.path.relpath(source.resolve()))
    return sorted(stale)
