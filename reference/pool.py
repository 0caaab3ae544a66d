"""The physical page pool (spec/semantics.md, section 3.3).

Pages are ids ``0 .. size-1``. A page is either free or owned by exactly one request
(PAGE-2); freeing a page makes it allocatable at once, hence from the next iteration on (PAGE-3).
Misuse raises :class:`PoolError` instead of corrupting the pool: the reference never lets a
broken call through silently.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


class PoolError(RuntimeError):
    """A page pool was used against its contract: over-allocation, double free or foreign free."""


class PagePool:
    """Free pages in a FIFO queue, owned pages mapped to their owner."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"pool size must be a positive int, got {size}")
        self.size = size
        self._free: deque[int] = deque(range(size))
        self._owner: dict[int, str] = {}

    @property
    def free_count(self) -> int:
        return len(self._free)

    def can_allocate(self, count: int) -> bool:
        return 0 <= count <= len(self._free)

    def allocate(self, owner: str, count: int) -> list[int]:
        """Take ``count`` free pages for ``owner`` (least recently freed first)."""
        if not self.can_allocate(count):
            raise PoolError(
                f"over-allocation: {owner} asked for {count} pages, {len(self._free)} are free"
            )
        pages = [self._free.popleft() for _ in range(count)]
        for page in pages:
            self._owner[page] = owner
        return pages

    def free(self, owner: str, pages: Sequence[int]) -> None:
        """Return ``owner``'s pages to the pool; all of them, or none if any is not theirs."""
        for page in pages:
            holder = self._owner.get(page)
            if holder is None:
                raise PoolError(f"double free: page {page} freed by {owner} is already free")
            if holder != owner:
                raise PoolError(f"foreign free: page {page} belongs to {holder}, not {owner}")
        if len(set(pages)) != len(pages):
            raise PoolError(f"double free: {owner} freed a page twice in {pages}")
        for page in pages:
            del self._owner[page]
            self._free.append(page)
