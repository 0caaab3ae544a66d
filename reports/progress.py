"""A one-line progress bar on stderr for long report runs.

Drawn only when the stream is a terminal: a CI log gets no carriage-return noise, and a report's
bytes never depend on whether anyone watched it being made. Redraws at most ten times a second so
a fast loop does not spend its time printing.
"""

from __future__ import annotations

import time
from typing import TextIO

_WIDTH = 24
_REDRAW_SECONDS = 0.1


class Progress:
    """``done`` of ``total`` for the current step, e.g. requests finished in one run."""

    def __init__(self, stream: TextIO, enabled: bool | None = None) -> None:
        self.stream = stream
        self.enabled = stream.isatty() if enabled is None else enabled
        self._label = ""
        self._total = 0
        self._done = 0
        self._started = time.monotonic()
        self._drawn_at = 0.0

    def start(self, label: str, total: int) -> None:
        """Begin a step of ``total`` units."""
        self._label, self._total, self._done = label, max(total, 0), 0
        self._started = time.monotonic()
        self._draw(force=True)

    def advance(self, units: int = 1) -> None:
        self._done += units
        self._draw(force=self._done >= self._total)

    def finish(self) -> None:
        """End the step: leave its final line on screen."""
        if self.enabled:
            self._done = self._total
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, force: bool) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < _REDRAW_SECONDS:
            return
        self._drawn_at = now
        fraction = min(self._done / self._total, 1.0) if self._total else 1.0
        filled = round(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        elapsed = now - self._started
        line = f"{self._label} [{bar}] {self._done}/{self._total} {elapsed:5.1f}s"
        self.stream.write("\r" + line + "\x1b[K")  # \x1b[K clears what a longer line left
        self.stream.flush()
