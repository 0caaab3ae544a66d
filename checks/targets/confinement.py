"""The limits a hosted target runs under, and the optional bubblewrap jail around its process.

A :class:`Confinement` is chosen on the command line (``--timeout``, ``--budget``,
``--memory-mb``, ``--output-limit``, ``--sandbox``) and stated under every verdict on a hosted
target; :mod:`.process` enforces it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Confinement:
    """The limits a target runs under; every verdict on a hosted target states them."""

    call_seconds: float = 10.0
    """Wall-clock seconds one call (or the import) may take."""
    budget_seconds: float = 600.0
    """Wall-clock seconds for the whole check, from the target's start, kvsched's own work included;
    it is enforced while kvsched waits on the target, and caps the host's CPU time too."""
    memory_mb: int = 2048
    """The host's address-space limit (RLIMIT_AS)."""
    output_bytes: int = 16 * 1024 * 1024
    """How much the target may write to stdout and stderr together: room for a learner's debugging
    prints over a whole check, not for a flood (only the last lines are kept in any case)."""
    sandbox: Literal["none", "bwrap"] = "none"
    """``bwrap``: run the host in bubblewrap, without network, on a read-only filesystem."""

    def describe(self) -> str:
        jail = (
            ", in bubblewrap (no network, read-only filesystem)" if self.sandbox == "bwrap" else ""
        )
        return (
            f"The target ran in a separate process{jail}: {self.call_seconds:g} s per call, "
            f"{self.budget_seconds:g} s for the whole check, {self.memory_mb} MiB of memory, "
            f"{_size(self.output_bytes)} of output."
        )


def _size(count: int) -> str:
    mib = 1024 * 1024
    return f"{count // mib} MiB" if count and count % mib == 0 else f"{count} bytes"


def bwrap_command(command: list[str], fds: tuple[int, ...]) -> list[str]:
    """``command`` under bubblewrap: no network, no other process in sight, all files read-only."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise FileNotFoundError("bwrap")
    return [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        *command,
    ]  # fmt: skip
