"""Test-suite configuration: the Hypothesis profiles and the ``slow`` marker.

The ``ci`` profile (fast, derandomized, no example database; see checks/search/profiles.py) is the
default, so ``pytest`` gives the same verdict on every machine. Choose another with
``pytest --hypothesis-profile=dev`` or ``HYPOTHESIS_PROFILE=thorough pytest``; the command-line
option wins over the environment variable.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from kvsched.checks.search.profiles import DEFAULT_PROFILE, register_profiles

register_profiles()
# Loaded at import, before Hypothesis's pytest plugin configures: its --hypothesis-profile option,
# applied in pytest_configure, then overrides this.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", DEFAULT_PROFILE))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes seconds rather than milliseconds; deselect with -m 'not slow'"
    )
    # Searches that size their workloads by the profile read it from the environment when their
    # module is collected, which comes after this: the option must reach them too.
    profile = config.getoption("hypothesis_profile", None)
    if profile:
        os.environ["HYPOTHESIS_PROFILE"] = profile
