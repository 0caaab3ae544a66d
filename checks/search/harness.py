"""How kvsched runs Hypothesis: the settings of one search or state machine, and the failure a
run raised, alone or inside the group Hypothesis may raise instead.
"""

from __future__ import annotations

import sys
from typing import TypeVar

from hypothesis import Phase, Verbosity, settings

from kvsched.checks.search.profiles import profile_settings
from kvsched.spec.vocabulary import PROFILE_NAMES, Profile, is_profile

if sys.version_info < (3, 11):  # Hypothesis depends on the backport there
    from exceptiongroup import BaseExceptionGroup

_Failure = TypeVar("_Failure", bound=BaseException)


def profile_name(name: str) -> Profile:
    if not is_profile(name):
        raise ValueError(f"unknown Hypothesis profile {name!r} (known: {', '.join(PROFILE_NAMES)})")
    return name


def search_settings(profile: str, max_examples: int | None, explicit: int) -> settings:
    """The profile's settings; ``explicit`` examples count in its examples, not a caller's."""
    base = profile_settings(profile)
    generated = max_examples if max_examples is not None else base.max_examples - explicit
    return settings(
        base,
        max_examples=max(1, generated),
        # One test function (and one state machine digest) serves every target, so a database
        # keyed by it would replay one target's failures on another; the saved workload file
        # is what persists a counterexample.
        database=None,
        print_blob=True,
        verbosity=Verbosity.quiet,
        # The explain phase only annotates Hypothesis's report, which is not shown.
        phases=tuple(phase for phase in base.phases if phase is not Phase.explain),
    )


def first_of(error: BaseException, kind: type[_Failure]) -> _Failure | None:
    """The first exception of ``kind`` in ``error`` or, if it is a group, anywhere inside it."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_of(inner, kind)
            if found is not None:
                return found
    return None
