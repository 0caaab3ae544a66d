"""A binary buddy allocator over an arena of KV token slots (docs/figure2.md).

The contiguous-chunk allocator the vLLM paper gives its Orca baselines: a request's chunk is one
block of a power-of-two size at an offset that is a multiple of it, and a freed block merges with
its buddy (the block at ``offset ^ size``) whenever that is free too. An arena that is not a
power of two starts as its binary decomposition, largest block first, so every block stays
aligned to its size. What the allocator wastes is therefore real: the rounding of a request up
to its block, and free slots split into blocks too small for the next request.
"""

from __future__ import annotations


class BuddyError(RuntimeError):
    """The allocator was used against its contract: no fitting block, or a foreign free."""


def block_for(slots: int) -> int:
    """The smallest power of two that holds ``slots`` slots (1 for 0)."""
    return 1 << max(0, slots - 1).bit_length()


class BuddyAllocator:
    """Free blocks by size; each held block maps its offset to its size."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"arena size must be a positive int, got {size}")
        self.size = size
        self._free: dict[int, set[int]] = {}
        self._held: dict[int, int] = {}
        offset = 0
        for bit in reversed(range(size.bit_length())):
            if size >> bit & 1:
                self._free.setdefault(1 << bit, set()).add(offset)
                offset += 1 << bit

    @property
    def free_slots(self) -> int:
        return sum(size * len(offsets) for size, offsets in self._free.items())

    @property
    def largest_free(self) -> int:
        """The largest free block, the largest request the allocator can take now."""
        return max((size for size, offsets in self._free.items() if offsets), default=0)

    @property
    def largest_block(self) -> int:
        """The largest block of the empty arena, the largest request it can ever take."""
        return 1 << (self.size.bit_length() - 1)

    def can_allocate(self, slots: int) -> bool:
        return block_for(slots) <= self.largest_free

    def allocate(self, slots: int) -> tuple[int, int]:
        """A block for ``slots`` slots as ``(offset, size)``: the lowest-offset free block of the
        smallest size that fits, split in halves down to ``block_for(slots)``."""
        wanted = block_for(slots)
        sizes = sorted(s for s, offsets in self._free.items() if s >= wanted and offsets)
        if not sizes:
            raise BuddyError(f"no free block of {wanted} slots (largest {self.largest_free})")
        size = sizes[0]
        offset = min(self._free[size])
        self._free[size].remove(offset)
        while size > wanted:
            size //= 2
            self._free.setdefault(size, set()).add(offset + size)
        self._held[offset] = size
        return offset, size

    def free(self, offset: int) -> None:
        """Return the block at ``offset``, merged with its free buddies."""
        size = self._held.pop(offset, None)
        if size is None:
            raise BuddyError(f"no block is held at offset {offset}")
        while (buddy := offset ^ size) in self._free.get(size, ()):
            self._free[size].remove(buddy)
            offset, size = min(offset, buddy), size * 2
        self._free.setdefault(size, set()).add(offset)
