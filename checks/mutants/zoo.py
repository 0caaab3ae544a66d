"""The zoo's catalogue: every mutant, the bug it plants, and the invariant that must catch it.

``kvsched mutants`` runs :data:`ZOO` through the same code path as ``kvsched check`` and prints the
mutation score: mutants caught *with the right invariant id* over all mutants. Scheduler mutants
live in :mod:`.paging`, :mod:`.batching`, :mod:`.hostile`, :mod:`.sized` (bugs only a crowd shows),
:mod:`.stalls` (engine bugs that stall without breaking a page or a token), :mod:`.corners` and
:mod:`.reuse` (engine bugs only the search's corners show) and :mod:`.hybrid` (a state slot pool's
bugs); learner mutants are the ``buggy_*.py`` solutions of ``learner/`` (shipped as package data
and written to a working directory, so that they are checked as the files a learner would pass);
and the engine bugs a scheduler cannot commit (admitting a request before it arrives, a token from
half a prompt) are event logs of broken engines, written by :mod:`.logs`.
"""

from __future__ import annotations

from kvsched.checks.mutants import (
    batching,
    corners,
    engine,
    hostile,
    hybrid,
    inflight,
    logs,
    paging,
    reuse,
    sized,
    stalls,
)
from kvsched.checks.mutants.mutant import Mutant, learner_file

__all__ = ["ZOO", "Mutant"]

LEARNER: tuple[Mutant, ...] = (
    Mutant("learner: rounding", "allocate_kv_pages off by one on full pages", "PAGE-1",
           write=learner_file("buggy_rounding.py")),
    Mutant("learner: leak", "schedule_iteration never returns pages", "PAGE-3",
           write=learner_file("buggy_leak.py")),
    Mutant("learner: static", "static admits into any free slot", "BATCH-2",
           write=learner_file("buggy_static.py"), policy="static"),
    Mutant("learner: float ceil", "math.ceil(tokens / page_size), wrong above 2**53", "PAGE-1",
           write=learner_file("buggy_float_ceil.py")),
)  # fmt: skip
"""The learner's buggy solutions (``learner/``, package data)."""

ZOO: tuple[Mutant, ...] = (
    *paging.MUTANTS,
    *logs.MUTANTS,
    *batching.MUTANTS,
    *engine.MUTANTS,
    *stalls.MUTANTS,
    *hostile.MUTANTS,
    *LEARNER,
    *sized.MUTANTS,
    *corners.MUTANTS,
    *reuse.MUTANTS,
    *inflight.MUTANTS,
    *hybrid.MUTANTS,
)
"""Every mutant, each module's beside its bugs."""
