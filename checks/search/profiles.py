"""The Hypothesis profiles kvsched runs under: ``ci``, ``dev`` and ``thorough``.

``ci`` is the default everywhere (tests/conftest.py, ``kvsched check``): derandomized, so the same
code gives the same verdict on every machine and every run, with no example database, so nothing
left over from an earlier run changes the result. ``dev`` tries more examples and keeps the
database, so a failure found once is replayed first the next time. ``thorough`` is for a nightly
job or before a release: many more examples and longer stateful runs, seeded at random.

No profile has a deadline: a slow scheduler under test is not a finding (the check command handles
hanging targets with its own timeout), and a deadline would make the verdict depend on the load of
the machine. ``too_slow`` is suppressed for the same reason.

A profile also sets what a check runs besides Hypothesis (:class:`ProfileRuns`): the sizes of the
seeded family runs, long runs in ``dev`` and ``thorough``, the allocator's drawn inputs, and the
check's time budget, past three quarters of which no new example starts (:func:`spend`).
``kvsched check`` never reads or writes an example database (one test function serves every
target, so a database would replay one target's failures on another): a run is replayed by its
seed (:func:`seeded`), which the report states.

Select one with ``pytest --hypothesis-profile=NAME``, the ``HYPOTHESIS_PROFILE`` environment
variable, or the ``profile`` argument of the searches in :mod:`.explore`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir

from kvsched.spec.vocabulary import DEFAULT_PROFILE, PROFILE_NAMES, Profile

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_RUNS",
    "PROFILE_SETTINGS",
    "BudgetSpent",
    "ProfileRuns",
    "cache_folder",
    "hypothesis_home",
    "profile_runs",
    "profile_settings",
    "register_profiles",
    "seeded",
    "spend",
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


@dataclass(frozen=True)
class ProfileRuns:
    """What a check replays besides Hypothesis's examples under a profile, and its time."""

    budget_seconds: float
    """The whole check's wall-clock budget unless ``--budget`` sets one."""
    family_requests: int
    """Requests in each seeded check family (``reference.families.CHECK_FAMILIES``) a
    scheduler class replays."""
    learner_family_requests: int
    """The same for a learner's solution: its state lists every request that ever arrived, so a
    run costs iterations times requests, and a quarter of the size runs in a sixteenth of it."""
    long_requests: int = 0
    """Requests in each family's long run (0: none): a bug that shows only thousands of
    requests in is out of reach of every other run."""
    learner_long_requests: int = 0
    """The same for a learner, whose runs cost the square of their size (9 CPU seconds in
    kvsched alone for 3,000 requests of ``check-bursty-short-tight``): dev stops at 5,000."""
    allocator_examples: int = 200
    """Inputs Hypothesis draws for a learner's ``allocate_kv_pages``, past its explicit ones."""
    minimum_examples: int = 25
    """The fewest Hypothesis examples a clean search may stop at and still pass: the time budget
    stops no search short of them, and a search that ends short of them anyway (the check's
    overall budget ran out) is inconclusive, never a pass."""

    def families(self, kind: str) -> tuple[int, ...]:
        """The sizes of the family runs a target of ``kind`` ("scheduler", "learner") gets."""
        if kind == "learner":
            sizes = (self.learner_family_requests, self.learner_long_requests)
        else:
            sizes = (self.family_requests, self.long_requests)
        return tuple(size for size in sizes if size)


PROFILE_RUNS: dict[Profile, ProfileRuns] = {
    "ci": ProfileRuns(600.0, 1000, 250),
    "dev": ProfileRuns(
        3600.0,
        1000,
        1000,
        long_requests=10_000,
        learner_long_requests=5_000,
        allocator_examples=2000,
        minimum_examples=100,
    ),
    "thorough": ProfileRuns(
        14_400.0,
        1000,
        1000,
        long_requests=50_000,
        learner_long_requests=10_000,
        allocator_examples=20_000,
        minimum_examples=1000,
    ),
}


def profile_runs(name: str) -> ProfileRuns:
    """The runs of profile ``name``; a ``ValueError`` names the known profiles otherwise."""
    profile_settings(name)
    return PROFILE_RUNS[name]  # type: ignore[index]


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


def cache_folder() -> Path:
    """kvsched's cache folder, for what it keeps between runs without being asked (Hypothesis's
    files, counterexamples): ``$KVSCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvsched``, else
    ``~/.cache/kvsched``; never the folder a user runs kvsched from."""
    cache = os.environ.get("KVSCHED_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvsched"
    )
    return Path(cache)


def use_kvsched_cache() -> None:
    """Point Hypothesis at :func:`hypothesis_home`, unless the user configured it."""
    home = hypothesis_home()
    if home is not None:
        set_hypothesis_home_dir(home)


class BudgetSpent(BaseException):
    """Raised inside a Hypothesis test once the check's time budget is spent. Not an Exception,
    so Hypothesis stops at once instead of shrinking it as a failure."""


def spend(until: float | None, failed: bool) -> None:
    """Stop a search past ``until`` (a ``time.monotonic()`` instant), unless an example has
    ``failed``: its counterexample is being shrunk, and stopping would lose it."""
    if until is not None and not failed and time.monotonic() >= until:
        raise BudgetSpent


def seeded(test: T, seed: int | None) -> T:
    """``test`` drawing from ``seed``, which replays its draws exactly; None leaves the
    profile's own choice (derandomized in ``ci``, fresh randomness elsewhere)."""
    return test if seed is None else hypothesis.seed(seed)(test)
