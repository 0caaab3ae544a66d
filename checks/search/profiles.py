"""The Hypothesis profiles kvsched runs under: ``ci``, ``dev`` and ``thorough``.

``ci`` is the default everywhere (tests/conftest.py, ``kvsched check``): derandomized, so the same
code gives the same verdict on every machine and every run, with no example database, so nothing
left over from an earlier run changes the result. ``dev`` tries more examples and keeps the
database, so a failure found once is replayed first the next time. ``thorough`` is for a nightly
job or before a release: many more examples and longer stateful runs, seeded at random.

No profile has a deadline: a slow scheduler under test is not a finding (the check command handles
hanging targets with its own timeout), and a deadline would make the verdict depend on the load of
the machine. ``too_slow`` is suppressed for the same reason.

A profile also sets what a check runs besides Hypothesis (:class:`.runs.ProfileRuns`, which a log
check reads without importing Hypothesis): the sizes of the seeded family runs, the allocator's
drawn inputs, the fewest examples a pass needs, and the check's time budget (:func:`.runs.spend`).
``kvsched check`` never reads or writes an example database (one test function serves every
target, so a database would replay one target's failures on another): a run is replayed by its
seed (:func:`seeded`), which the report states.

Select one with ``pytest --hypothesis-profile=NAME``, the ``HYPOTHESIS_PROFILE`` environment
variable, or the ``profile`` argument of the searches in :mod:`.explore`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

from kvsched.checks.search.runs import cache_folder
from kvsched.spec.vocabulary import DEFAULT_PROFILE, PROFILE_NAMES, Profile

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_SETTINGS",
    "hypothesis_home",
    "profile_settings",
    "register_profiles",
    "seeded",
    "use_kvsched_cache",
]

T = TypeVar("T", bound=Callable[..., Any])


# Built on Hypothesis's own "default" profile, not on whatever profile is loaded at import time,
# so the profiles mean the same thing whoever imports this module first.
_COMMON = settings(
    settings.get_profile("default"),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)

PROFILE_SETTINGS: dict[Profile, settings] = {
    # No explain phase in ci: on a failing state machine it costs tens of seconds to annotate a
    # report that the counterexample already makes plain.
    "ci": settings(
        _COMMON,
        max_examples=100,
        derandomize=True,
        database=None,
        stateful_step_count=30,
        phases=tuple(phase for phase in Phase if phase is not Phase.explain),
    ),
    "dev": settings(_COMMON, max_examples=500, stateful_step_count=50),
    "thorough": settings(_COMMON, max_examples=5000, stateful_step_count=100),
}


def profile_settings(name: str) -> settings:
    """The settings of profile ``name``; a ``ValueError`` names the known profiles otherwise."""
    try:
        return PROFILE_SETTINGS[name]  # type: ignore[index]
    except KeyError:
        known = ", ".join(PROFILE_NAMES)
        raise ValueError(f"unknown Hypothesis profile {name!r} (known: {known})") from None


def register_profiles() -> None:
    """Register every profile with Hypothesis, so ``--hypothesis-profile=NAME`` finds it.

    Registering is idempotent; which profile is *loaded* stays the caller's choice.
    """
    for name, profile in PROFILE_SETTINGS.items():
        settings.register_profile(name, profile)


def hypothesis_home() -> Path | None:
    """Where Hypothesis keeps its files (example database, caches) when kvsched runs it.

    Hypothesis's default is ``.hypothesis/`` in the current directory, which would litter every
    folder a user runs ``kvsched check`` from. kvsched uses its cache folder instead:
    ``$KVSCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvsched``, else ``~/.cache/kvsched``, with
    ``hypothesis/`` inside. ``HYPOTHESIS_STORAGE_DIRECTORY``, Hypothesis's own setting, wins:
    then this returns None and Hypothesis's choice stands.
    """
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return None
    return cache_folder() / "hypothesis"


def use_kvsched_cache() -> None:
    """Point Hypothesis at :func:`hypothesis_home`, unless the user configured it."""
    home = hypothesis_home()
    if home is not None:
        set_hypothesis_home_dir(home)


def seeded(test: T, seed: int | None) -> T:
    """``test`` drawing from ``seed``, which replays its draws exactly; None leaves the
    profile's own choice (derandomized in ``ci``, fresh randomness elsewhere)."""
    return test if seed is None else hypothesis.seed(seed)(test)
