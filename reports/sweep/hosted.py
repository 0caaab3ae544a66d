"""A grid's scheduler under test: a ``file.py:Class`` hosted in a sandboxed process per cell.

The class is third-party code. As in ``kvsched check`` and ``kvsched report`` it is never
imported into kvsched's process, nor into a pool's or a cluster's worker: each cell loads it in a
host process of its own, through the judge's door
(:func:`kvsched.checks.judge.door.hosted_scheduler`), under the default
:class:`~kvsched.checks.targets.confinement.Confinement`, and closes it when the cell
ends, so a class that hangs, exits or floods its output ends its own cell, not the sweep.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kvsched.checks.judge.door import HostFailure, TargetError, hosted_scheduler
from kvsched.checks.targets.confinement import Confinement
from kvsched.spec.protocol import SchedulerFactory


class CellError(ValueError):
    """A cell cannot run as the grid defines it (its workload, limits or target); exit 2."""


class BrokenHost(Exception):
    """The target broke its host while being imported: PROTO-1, the target's finding."""


def source_digest(file: Path) -> str:
    """SHA-256 of the target's file and of the Python files beside it, which it may import: a
    change to any of them makes its cells new, never resumed ones. OSError if unreadable."""
    digest = hashlib.sha256()
    for path in sorted({file, *file.parent.glob("*.py")}):
        digest.update(f"{path.name}\0{len(path.read_bytes())}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@contextmanager
def hosted(target: str, digest: str, policy: str) -> Iterator[tuple[SchedulerFactory, str]]:
    """The hosted target's factory and the policy its runs are judged by, the host closed on
    leaving. CellError if it cannot be loaded; BrokenHost if its import broke the host."""
    file = Path(target.rpartition(":")[0])
    try:
        found = source_digest(file)
    except OSError as error:
        raise CellError(f"{target}: cannot read the target's file ({error.strerror})") from None
    if found != digest:
        raise CellError(
            f"{target}: the target's files changed since the grid was read (or differ on this "
            "worker): rerun the sweep to key its cells by the files as they are now"
        )
    with ExitStack() as host:
        try:
            loaded = host.enter_context(hosted_scheduler(target, Confinement()))
        except TargetError as error:
            raise CellError(str(error)) from None
        except HostFailure as failure:
            raise BrokenHost(f"the target broke its host while being imported: {failure}") from None
        judged = policy or loaded.policy
        if not judged:
            raise CellError(
                f"{target}: the class declares no policy; give the target's policy in the grid "
                '(policy = "continuous" or "static")'
            )
        yield loaded.factory, judged
