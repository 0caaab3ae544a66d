"""A failure Hypothesis found, kept as a workload file and a ``@reproduce_failure`` line.

Both ways back to a failure live here. The workload file (spec/workload.py) is the durable one:
``kvsched replay`` and ``kvsched check --workload`` rerun it exactly, because the engine is
deterministic, on any version of kvsched and Hypothesis. The reproduce line is Hypothesis's own
(printed because the search runs with ``print_blob=True``): it replays the one test case in the
same search, and only under the same Hypothesis version and workload strategy.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from kvsched.checks.monitor.findings import Finding
from kvsched.spec.workload import Workload, workload_to_json


@dataclass(frozen=True)
class Counterexample:
    """A minimal workload on which the target breaks an invariant, and how to get it back."""

    workload: Workload
    """The shrunk workload; its description says what it shows."""
    finding: Finding
    """What the monitor reported on it."""
    examples: int
    """Test cases run before and while shrinking, this one included."""
    reproduce: str
    """Hypothesis's ``@reproduce_failure(...)`` line; pass it as ``search(reproduce=...)``."""
    deterministic: bool = True
    """False when the target answered the same workload differently on replay (Hypothesis called
    it flaky): the finding is real, but the saved workload may not show it every time."""

    def save(self, path: str | Path) -> Path:
        """Write the workload file that ``kvsched replay`` and ``kvsched check --workload`` read."""
        return save_workload(self.workload, path)


@dataclass(frozen=True)
class StatefulCounterexample:
    """How the state machine of :mod:`.stateful` broke the target, as a replayable workload."""

    workload: Workload
    """The requests the rules declared up to the failure, with the arrivals they chose."""
    summary: str
    finding: Finding | None
    """The monitor's finding; None when the target only disagreed with the reference."""
    reproduce: str

    def save(self, path: str | Path) -> Path:
        return save_workload(self.workload, path)


def save_workload(workload: Workload, path: str | Path) -> Path:
    """Write ``workload`` as a workload file (spec/workload.py) that ``kvsched replay`` reads."""
    path = Path(path)
    path.write_text(json.dumps(workload_to_json(workload), indent=2) + "\n", encoding="utf-8")
    return path


def reproduce_line(error: BaseException) -> str:
    """The ``@reproduce_failure(...)`` line Hypothesis attached to ``error``; "" if none."""
    # print_blob=True makes Hypothesis attach the decorator to the exception as a note.
    notes: list[str] = getattr(error, "__notes__", [])
    for note in notes:
        start = note.find("@reproduce_failure(")
        if start >= 0:
            end = note.index(")", start)
            return note[start : end + 1]
    return ""


def parse_reproduce(line: str) -> tuple[str, bytes]:
    """The Hypothesis version and blob of a reproduce line; ``ValueError`` if it is not one."""
    prefix = "@reproduce_failure"
    text = line.strip()
    try:
        if not text.startswith(prefix):
            raise ValueError(f"it does not start with {prefix}")
        version, blob = ast.literal_eval(text[len(prefix) :])
        if not isinstance(version, str) or not isinstance(blob, bytes):
            raise ValueError("expected a version string and a bytes blob")
    except (SyntaxError, ValueError, TypeError) as error:
        raise ValueError(
            f"not a reproduce line {line!r} ({error}); expected "
            "@reproduce_failure('VERSION', b'BLOB') as a failed search printed it"
        ) from None
    return version, blob
