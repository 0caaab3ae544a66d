"""Colour and progress, for a person at a terminal only.

Output that a program reads (a pipe, a file, CI, ``--json``) stays plain and the same from run to
run: no colour, no progress, nothing on standard error. On a terminal, the check's progress
(:mod:`kvsched.checks.progress`) is drawn on standard error and erased at the end, results known
early (the allocator's verdict) are printed above it as they come, and the verdict's first line
is coloured. ``NO_COLOR`` and ``TERM=dumb`` are honoured by rich itself.

A phase's name can hold the target's words (a workload's name, read from its log), so it is
escaped twice before rich draws it: as rich markup (``[blink]`` is text, and ``[/x]`` no
error) and as kvsched escapes every text the target wrote (:func:`kvsched.spec.text.escaped`).
The verdict itself is drawn as plain :class:`~rich.text.Text`, never markup, and escaped again
here, the last edge before the terminal.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from kvsched.checks import progress
from kvsched.checks.verdict.render import allocator_line
from kvsched.checks.verdict.report import AllocatorVerdict
from kvsched.commands.output import emit, printing
from kvsched.spec.text import escaped

if TYPE_CHECKING:  # rich is imported only to draw on a terminal: piped and in CI, never
    from rich.progress import Progress, TaskID
    from rich.text import Text


def for_a_person(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal a person reads, outside CI."""
    if stream is None or os.environ.get("CI"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Drawn:
    """A :class:`~kvsched.checks.progress.Listener` drawing one line of rich progress."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task: TaskID | None = None
        self.started = time.monotonic()

    def phase(self, name: str, total: int | None) -> None:
        from rich.markup import escape

        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(escape(escaped(name)), total=total)

    def advance(self, done: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=done)

    def result(self, found: object) -> None:
        from rich.text import Text

        took = time.monotonic() - self.started
        if isinstance(found, AllocatorVerdict):
            line = f"{allocator_line(found)} ({took:.1f} s)"
            self.bar.console.print(Text(escaped(line)), soft_wrap=True)
        elif isinstance(found, progress.Failed):
            # The answer is known: FAIL. What follows only makes the witness small.
            line = (
                f"Violation found: {found.invariant} broke at {found.where}, so the check "
                f"fails; now making its witness smaller ({took:.1f} s)"
            )
            self.bar.console.print(Text(escaped(line), style="bold red"), soft_wrap=True)


@contextmanager
def showing_progress(plain: bool) -> Iterator[None]:
    """Draw the check's progress on standard error, unless ``plain`` or not on a terminal."""
    if plain or not for_a_person(sys.stderr):
        yield
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=16),
        MofNCompleteColumn(),
        # Each time says what it is: "0:00:03 elapsed, 00:13 left", not "0:00:03 left 00:13".
        TimeElapsedColumn(),
        TextColumn("elapsed,"),
        TimeRemainingColumn(compact=True),
        TextColumn("left"),
        console=Console(stderr=True),
        transient=True,  # the verdict replaces it
    )
    with bar, progress.listening(_Drawn(bar)):
        yield


_MARKS = (
    (re.compile(r"^PASS\b"), "bold green"),
    (re.compile(r"^FAIL\b"), "bold red"),
    (re.compile(r"^INCONCLUSIVE\b"), "bold yellow"),
    (re.compile(r"\b[A-Z]+-\d+ violated\b"), "red"),
    (re.compile(r"^\d+ hold\w*\b", re.MULTILINE), "green"),
)


def coloured(text: str) -> Text | str:
    """``text`` marked up for a terminal when standard output is one; else as it is."""
    if not for_a_person(sys.stdout):
        return text
    from rich.text import Text

    marked = Text(text)
    for pattern, style in _MARKS:
        marked.highlight_regex(pattern, style)
    return marked


def emit_for_a_person(text: str) -> None:
    """Print a verdict: coloured on a terminal, byte for byte ``text`` anywhere else (escaped,
    which leaves kvsched's own words as they are)."""
    shown = coloured(escaped(text))
    if isinstance(shown, str):
        emit(shown)
        return
    from rich.console import Console

    with printing():
        Console(file=sys.stdout, soft_wrap=True).print(shown)
