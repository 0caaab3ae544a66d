"""What a profile runs besides Hypothesis's examples, where a check keeps its files, and the
check's time budget.

Nothing here imports Hypothesis: a log check, the command line and the verdict read these
without loading it (the profiles' Hypothesis settings are :mod:`.profiles`). Each profile
(``ci``, ``dev``, ``thorough``) sets the sizes of the seeded family runs, long runs in ``dev``
and ``thorough``, the allocator's drawn inputs, the fewest examples a clean search may stop at,
and the check's time budget, past three quarters of which no new example starts (:func:`spend`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kvsched.spec.vocabulary import PROFILE_NAMES, Profile


@dataclass(frozen=True)
class ProfileRuns:
    """What a check replays besides Hypothesis's examples under a profile, and its time."""

    budget_seconds: float
    """The whole check's wall-clock budget unless ``--budget`` sets one."""
    family_requests: int
    """Requests in each seeded check family (``reference.families.CHECK_FAMILIES``) a
    scheduler class replays."""
    learner_family_requests: int
    """The same for a learner's solution: its state lists every request that ever arrived, so a
    run costs iterations times requests, and a quarter of the size runs in a sixteenth of it."""
    long_requests: int = 0
    """Requests in each family's long run (0: none): a bug that shows only thousands of
    requests in is out of reach of every other run."""
    learner_long_requests: int = 0
    """The same for a learner, whose runs cost the square of their size (9 CPU seconds in
    kvsched alone for 3,000 requests of ``check-bursty-short-tight``): dev stops at 5,000."""
    long_run: int = 10_000
    """Requests in the long run of a scheduler class (:func:`kvsched.reference.families.long_run`,
    requests of a few tokens): finished requests by the ten thousand on every profile. 10,000 cost
    ``VLLMV1Scheduler`` about 1 s of CPU in process and 3 to 4 s hosted, where every
    ``add_request`` is a round trip. A learner's state lists every request, so its runs cost the
    square of their size and it gets none; its long families are the dev's."""
    allocator_examples: int = 200
    """Inputs Hypothesis draws for a learner's ``allocate_kv_pages``, past its explicit ones."""
    minimum_examples: int = 25
    """The fewest Hypothesis examples a clean search may stop at and still pass: the time budget
    stops no search short of them, and a search that ends short of them anyway (the check's
    overall budget ran out) is inconclusive, never a pass."""

    def families(self, kind: str) -> tuple[int, ...]:
        """The sizes of the family runs a target of ``kind`` ("scheduler", "learner") gets."""
        if kind == "learner":
            sizes = (self.learner_family_requests, self.learner_long_requests)
        else:
            sizes = (self.family_requests, self.long_requests)
        return tuple(size for size in sizes if size)


PROFILE_RUNS: dict[Profile, ProfileRuns] = {
    "ci": ProfileRuns(600.0, 1000, 250),
    "dev": ProfileRuns(
        3600.0,
        1000,
        1000,
        long_requests=10_000,
        learner_long_requests=5_000,
        long_run=100_000,
        allocator_examples=2000,
        minimum_examples=100,
    ),
    "thorough": ProfileRuns(
        14_400.0,
        1000,
        1000,
        long_requests=50_000,
        learner_long_requests=10_000,
        long_run=300_000,
        allocator_examples=20_000,
        minimum_examples=1000,
    ),
}


ALLOCATOR_BITS = 4096
"""The longest ints drawn for a learner's ``allocate_kv_pages``, in bits (1,234 digits): the
exercise asks for any size of int, so the draws run far past any float, any fixed-width int and
any ``decimal`` precision a solution might set (80 digits is exact only to about 2**266), and
stay well inside what crosses the wire to a hosted target (4,300 digits)."""


def profile_runs(name: str) -> ProfileRuns:
    """The runs of profile ``name``; a ``ValueError`` names the known profiles otherwise."""
    if name not in PROFILE_RUNS:
        known = ", ".join(PROFILE_NAMES)
        raise ValueError(f"unknown Hypothesis profile {name!r} (known: {known})")
    return PROFILE_RUNS[name]


def cache_folder() -> Path:
    """kvsched's cache folder, for what it keeps between runs without being asked (Hypothesis's
    files, counterexamples): ``$KVSCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvsched``, else
    ``~/.cache/kvsched``; never the folder a user runs kvsched from."""
    cache = os.environ.get("KVSCHED_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvsched"
    )
    return Path(cache)


class BudgetSpent(BaseException):
    """Raised inside a Hypothesis test once the check's time budget is spent. Not an Exception,
    so Hypothesis stops at once instead of shrinking it as a failure."""


def spend(until: float | None, hold: bool) -> None:
    """Stop a search past ``until`` (a ``time.monotonic()`` instant), unless ``hold``: an
    example failed and its counterexample is being shrunk, which stopping would lose, or the
    search is still short of the fewest examples a pass needs."""
    if until is not None and not hold and time.monotonic() >= until:
        raise BudgetSpent
