"""A mutant of the zoo: a planted bug, the invariant that must catch it, and its target.

Each module of planted bugs lists its own mutants beside their classes (``MUTANTS``), so that a
new mutant is one file's change; :mod:`.zoo` gathers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    """The planted bug, in words."""
    expected: str
    """The invariant id ``kvsched check`` must report, and no other."""
    target: str = ""
    """TARGET as ``kvsched check`` takes it; empty when :attr:`write` writes it."""
    policy: str = ""
    """``--policy``: for a learner's file, the policy its bug shows under."""
    timeout: float = 10.0
    write: Callable[[Path], Path] | None = None
    """Writes the target (a file or an event log) into the given directory; returns its path."""

    def materialise(self, workdir: Path) -> str:
        """The TARGET string to check, writing the mutant's file first if it has one."""
        if self.write is not None:
            return str(self.write(workdir))
        return self.target


def learner_file(name: str) -> Callable[[Path], Path]:
    """A writer of the learner's solution ``learner/<name>`` into a working directory."""

    def write(workdir: Path) -> Path:
        path = workdir / name
        path.write_text((files(__package__) / "learner" / name).read_text())
        return path

    return write
