"""What each kind of line costs the fast path, by hand: ``python benchmarks/line_kinds.py LOG``.

Times :meth:`~kvsched.checks.eventlog.steady.SteadyDecode.take` on every line of a version-2
log (``perf_counter`` around each call, so each figure carries the timer's own cost), and sorts
the lines by what they do: finish a request, admit one, decode with a changed decode list, or
only allocate and repeat the last decode list. Prints each kind's count, total and mean. Not an
asv benchmark: it patches the class it measures, for the one process it runs in.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from kvsched.checks.eventlog import steady
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.version2 import Admit, Decode, Finish, IterationLine


def main(path: str) -> None:
    spent: Counter[str] = Counter()
    lines: Counter[str] = Counter()
    take = steady.SteadyDecode.take

    def timed(
        self: steady.SteadyDecode, line: IterationLine, waiting: tuple[str, ...] | None
    ) -> tuple[str, ...] | None:
        kind = _kind(self, line)
        started = time.perf_counter()
        taken = take(self, line, waiting)
        spent[kind] += time.perf_counter() - started
        lines[kind] += 1
        return taken

    steady.SteadyDecode.take = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    check_stream(path)
    print(f"all: {time.perf_counter() - started:.3f} s")
    for kind in sorted(lines):
        mean = spent[kind] / lines[kind] * 1e6
        print(f"{kind:16} {lines[kind]:7} lines {spent[kind]:7.3f} s {mean:6.2f} us a line")


def _kind(fast: steady.SteadyDecode, line: IterationLine) -> str:
    kinds = {type(op) for op in line.ops}
    if Finish in kinds:
        return "finish"
    if Admit in kinds:
        return "admit"
    last = line.ops[-1] if line.ops else None
    same = isinstance(last, Decode) and last.requests == fast.decode.raw
    return "decode-only" if same and fast.last_decode is fast.decode.ids else "decode-changed"


if __name__ == "__main__":
    main(sys.argv[1])
