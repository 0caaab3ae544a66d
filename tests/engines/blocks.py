"""A block pool with reference counts and a prefix cache, after vLLM v1's ``BlockPool``, plus the
helper that turns one simulated iteration into an :class:`IterationEvent`.

Free blocks wait in an LRU queue; the free count is a separate counter, as in vLLM's
``FreeKVCacheBlockQueue``. A freed block keeps its prefix hash until it is popped for reuse (lazy
eviction), so a later request can still hit it and revive it from the queue.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping

from kvsched.spec.events import IterationEvent, fixed_order


class BlockPool:
    """Blocks ``0 .. num_blocks - 1``; with ``null_block`` block 0 is never handed out."""

    def __init__(self, num_blocks: int, null_block: bool = False, ghost: bool = False) -> None:
        first = 1 if null_block else 0
        self.queue: deque[int] = deque(range(first, num_blocks))
        self.num_free = len(self.queue)
        self.ref: dict[int, int] = {}
        self.hash_to_block: dict[Hashable, int] = {}
        self.block_hash: dict[int, Hashable] = {}
        # Planted bug (free-queue ghost entry): reviving a cached free block updates the free
        # counter but leaves the block in the queue, so it is handed out again while still used.
        self.ghost = ghost

    def get_new(self, count: int) -> list[int]:
        """Pop ``count`` blocks from the queue front, evicting their cached hashes."""
        assert count <= self.num_free, "caller checks the free count first"
        blocks = []
        for _ in range(count):
            block = self.queue.popleft()
            key = self.block_hash.pop(block, None)
            if key is not None and self.hash_to_block.get(key) == block:
                del self.hash_to_block[key]
            self.ref[block] = 1
            blocks.append(block)
        self.num_free -= count
        return blocks

    def lookup(self, keys: Iterable[Hashable]) -> list[int]:
        """Cached blocks for consecutive prefix keys, stopping at the first miss."""
        hits = []
        for key in keys:
            block = self.hash_to_block.get(key)
            if block is None:
                break
            hits.append(block)
        return hits

    def revived(self, blocks: Iterable[int]) -> int:
        """How many of ``blocks`` are free (cached) and would leave the queue if touched."""
        return sum(1 for b in blocks if self.ref.get(b, 0) == 0)

    def touch(self, blocks: Iterable[int]) -> None:
        """Take a reference on prefix-hit blocks, reviving free ones from the queue."""
        for block in blocks:
            if self.ref.get(block, 0) == 0:
                if not self.ghost:
                    self.queue.remove(block)
                self.num_free -= 1
            self.ref[block] = self.ref.get(block, 0) + 1

    def cache(self, block: int, key: Hashable) -> None:
        if block not in self.block_hash and key not in self.hash_to_block:
            self.block_hash[block] = key
            self.hash_to_block[key] = block

    def free(self, blocks: Iterable[int]) -> None:
        """Drop one reference per entry; a block at zero joins the queue's back (LRU)."""
        for block in blocks:
            # A planted double free drives a count below zero; the monitor reports it.
            self.ref[block] = self.ref.get(block, 0) - 1
            if self.ref[block] == 0:
                del self.ref[block]
                self.queue.append(block)
                self.num_free += 1


def make_event(
    n: int,
    *,
    arrived: Iterable[str],
    admitted: Iterable[str],
    active: Iterable[str],
    decoded: Iterable[str],
    finished: Iterable[str],
    tables: Mapping[str, Iterable[int]],
    before: Mapping[str, Iterable[int]],
    freed: Mapping[str, Iterable[int]],
    free_pages: int,
    waiting: Iterable[str],
    computed: Mapping[str, int] | None = None,
    cached: Mapping[str, int] | None = None,
    shared: Mapping[str, Iterable[int]] | None = None,
    preempted: Iterable[str] = (),
) -> IterationEvent:
    """One iteration's event; ``allocated`` is what each table gained over ``before``."""
    page_tables = {rid: tuple(table) for rid, table in tables.items()}
    stopped, joined, batch = tuple(preempted), tuple(admitted), tuple(active)
    # As in version 1, 'freed' holds a preempted request's releases too: they go to the schedule.
    released = {rid: tuple(freed.get(rid, ())) for rid in stopped}
    shared_pages = {rid: tuple(p) for rid, p in (shared or {}).items() if p}
    before_tables = {rid: tuple(table) for rid, table in before.items()}
    schedule, allocated = fixed_order(
        before_tables, stopped, released, joined, page_tables, shared_pages
    )
    return IterationEvent(
        iteration=n,
        arrived=tuple(arrived),
        admitted=joined,
        active=batch,
        decoded=tuple(decoded),
        finished=tuple(finished),
        page_tables=page_tables,
        allocated=allocated,
        freed={rid: tuple(pages) for rid, pages in freed.items() if rid not in released},
        free_pages=free_pages,
        waiting=tuple(waiting),
        schedule=schedule,
        computed=dict(computed) if computed is not None else None,
        cached={rid: k for rid, k in (cached or {}).items() if k},
        shared=shared_pages,
        preempted=stopped,
    )
