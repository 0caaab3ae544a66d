"""Where a report's figures were made: kvsched's version, the git commit, the time.

A team reading a report kept by CI needs to know which code produced it. The commit is the one
checked out in the folder the report is run from (with a mark when the tree has uncommitted
changes); outside a git checkout there is none, and the report says so rather than guessing.
The time honours ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention), so a report
regenerated with it set is the same byte for byte.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata

_GIT_SECONDS = 5


@dataclass(frozen=True)
class Provenance:
    version: str
    """kvsched's version."""
    commit: str = ""
    """The full commit hash, empty when not made from a git checkout."""
    dirty: bool = False
    """The checkout had uncommitted changes, so the commit alone does not name the code."""
    time: str = ""
    """When, as ISO 8601 in UTC (``2026-11-30T17:20:00Z``)."""

    @property
    def commit_words(self) -> str:
        if not self.commit:
            return "none (not run from a git checkout)"
        return self.commit[:12] + (" with uncommitted changes" if self.dirty else "")

    @property
    def time_words(self) -> str:
        return self.time.replace("T", " ").replace("Z", " UTC") if self.time else "unknown"

    def as_json(self) -> dict[str, object]:
        return {"version": self.version, "commit": self.commit, "dirty": self.dirty} | {
            "time": self.time
        }


def current_provenance() -> Provenance:
    commit = _git("rev-parse", "HEAD")
    dirty = bool(commit) and bool(_git("status", "--porcelain", "--untracked-files=no"))
    return Provenance(_version(), commit, dirty, _now())


def provenance_from_json(raw: object) -> Provenance | None:
    """The provenance a results.json recorded, or None for files written before it did."""
    if not isinstance(raw, dict):
        return None
    fields = {name: raw.get(name) for name in ("version", "commit", "time")}
    if not all(isinstance(v, str) for v in fields.values()):
        return None
    return Provenance(
        str(fields["version"]),
        str(fields["commit"]),
        raw.get("dirty") is True,
        str(fields["time"]),
    )


def _version() -> str:
    try:
        return metadata.version("kvsched")
    except metadata.PackageNotFoundError:
        return "unknown"


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    when = (
        datetime.fromtimestamp(int(epoch), timezone.utc)
        if epoch.isdigit()
        else datetime.now(timezone.utc)
    )
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _git(*words: str) -> str:
    try:
        done = subprocess.run(
            ["git", *words], capture_output=True, text=True, timeout=_GIT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
