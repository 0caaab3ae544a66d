"""What the signal tests share: a target that hangs in its first call, and a wait for a phase."""

from __future__ import annotations

import time
from collections.abc import Callable

SLOW = '''
import time
from kvsched.reference import ContinuousScheduler

class Slow(ContinuousScheduler):
    """Sleeps in its first call, far longer than the test waits."""

    def schedule(self):
        time.sleep(300)
        return super().schedule()
'''


def wait_for(condition: Callable[[], object], seconds: float) -> bool:
    """Whether ``condition()`` came true within ``seconds``, polled every 50 ms."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if condition():
            return True
        time.sleep(0.05)
    return False
