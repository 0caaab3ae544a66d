"""A target's traceback in a verdict, trimmed to the frames of the user's own code.

"schedule() failed: IndexError: pop from empty list" tells a user what went wrong but not where.
The frames of kvsched itself (the engine that called the target, the learner adapter) and of
Python's standard library say nothing the user can act on, so they are left out; what remains is
the file, line, function and source line in the user's code where the error was raised, innermost
last, as Python prints it. The result is a plain string, so it travels inside a fault's message
wherever the message goes (a child process, JSON, JUnit XML).
"""

from __future__ import annotations

import os
import sysconfig
import traceback

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The kvsched package folder, as imported."""
_NOT_USER = tuple(
    {_OURS, os.path.realpath(_OURS), sysconfig.get_paths()["stdlib"]}
    | {os.path.realpath(sysconfig.get_paths()["stdlib"])}
)


def user_frames(error: BaseException, most: int = 6) -> str:
    """The user's frames of ``error`` (and of the errors it was raised from), or "".

    An error raised in another process (a target hosted apart from kvsched) arrives with its
    frames already formatted there, as ``remote_frames``; those are the ones to show.
    """
    lines: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        carried = getattr(current, "remote_frames", "")
        if isinstance(carried, str) and carried:  # an adapter may wrap the hosted error
            return carried
        for frame in traceback.extract_tb(current.__traceback__):
            if _is_user(frame.filename):
                code = f": {frame.line.strip()}" if frame.line else ""
                lines.append(f"{frame.filename}, line {frame.lineno}, in {frame.name}{code}")
        current = current.__cause__
    if not lines:
        return ""
    shown = lines[-most:]
    return "\n".join(["in your code (most recent call last):", *(f"  {x}" for x in shown)])


def _is_user(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    real = os.path.realpath(filename)
    return not any(p.startswith(root + os.sep) for root in _NOT_USER for p in (path, real))
