"""Every attack runs in a folder of its own, which is also the current directory."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def marker(request: pytest.FixtureRequest) -> str:
    """A string to put in the command line of a process the target starts, to find it by."""
    return f"kvsched-attack-{os.getpid()}-{uuid.uuid4().hex[:12]}"
