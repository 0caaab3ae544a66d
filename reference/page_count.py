"""Page accounting: how many KV pages a number of tokens needs (spec/semantics.md, section 2).

``pages_for`` itself lives in ``kvsched.spec.workload`` (the loader needs it to reject requests
that can never fit); this module adds the exercise's checked, dict-returning contract.
"""

from __future__ import annotations

from typing import Any

from kvsched.spec.workload import pages_for


def allocate_kv_pages(tokens: int, page_size: int = 16) -> dict[str, int]:
    """Pages, capacity and wasted slots for ``tokens`` tokens in pages of ``page_size`` slots.

    ``pages = ceil(tokens / page_size)``, ``capacity = pages * page_size`` and
    ``wastedSlots = capacity - tokens``, so ``0 <= wastedSlots < page_size`` and no smaller page
    count holds the tokens (invariant PAGE-1). The key ``wastedSlots`` is the exercise's spelling.

    >>> allocate_kv_pages(33)
    {'pages': 3, 'capacity': 48, 'wastedSlots': 15}
    """
    _require_int("tokens", tokens, minimum=0)
    _require_int("page_size", page_size, minimum=1)
    pages = pages_for(tokens, page_size)
    capacity = pages * page_size
    return {"pages": pages, "capacity": capacity, "wastedSlots": capacity - tokens}


def _require_int(name: str, value: Any, minimum: int) -> None:
    # bool is an int subclass; allocate_kv_pages(True) is a mistake, not one token.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        bound = "a non-negative int" if minimum == 0 else "a positive int"
        raise ValueError(f"{name} must be {bound}, got {value}")
