"""Test-suite configuration: the Hypothesis profiles, the ``slow`` marker, and a header line
saying whether the event-log checker's fast path is compiled (setup.py) or plain.

The ``ci`` profile (fast, derandomized, no example database; see checks/search/profiles.py) is the
default, so ``pytest`` gives the same verdict on every machine. Choose another with
``pytest --hypothesis-profile=dev`` or ``HYPOTHESIS_PROFILE=thorough pytest``; the command-line
option wins over the environment variable.
"""

from __future__ import annotations

import os
from pathlib import Path

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


def pytest_report_header() -> str:
    from kvsched.checks.eventlog import steady

    compiled = Path(str(steady.__file__)).suffix == ".so"
    return f"kvsched fast path: {'compiled with mypyc' if compiled else 'plain Python'}"
