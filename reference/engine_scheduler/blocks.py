"""The engine scheduler's block manager: a reference-counted pool with a prefix cache
(spec/semantics.md, section 10.2).

A page is free (reference count 0, in the free queue) or held by the requests whose tables list
it. Full pages carry a hash that chains every page before them, so a page is found again only by
a request whose tokens up to it are the same. A freed page keeps its hash and waits in the free
queue as evictable cache: a later request with the same prefix takes it back by reference (a
hit); allocating a fresh page takes the least recently freed one and evicts its hash. With a null
page, page 0 is never handed out (vLLM's null block). Misuse raises :class:`PoolError`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from kvsched.reference.pool import PoolError

PageKey = tuple[str, int]
"""What a full page holds: ``(prefix group, index)`` inside a shared prefix, else
``(request id, index)`` (section 1.1): the workload's stand-in for the tokens themselves."""


class BlockManager:
    """Pages ``0 .. size - 1``; free ones in LRU order, held ones with reference counts."""

    def __init__(self, size: int, null_page: bool = False) -> None:
        first = 1 if null_page else 0
        if size - first < 1:
            raise ValueError(f"a pool of {size} pages has no usable page")
        self.size = size
        self.usable = size - first
        # Free pages, least recently freed first; a dict keeps O(1) removal for a revived hit.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(first, size))
        self.ref: dict[int, int] = {}
        self._cached: dict[int, int] = {}  # chain hash -> page
        self._hash_of: dict[int, int] = {}  # page -> chain hash
        self._chains: dict[tuple[int, PageKey], int] = {}  # interned hash chain links

    @property
    def free_count(self) -> int:
        """Free pages, cached ones included: they are evicted on demand."""
        return len(self._free)

    def chain(self, keys: Sequence[PageKey], parent: int = -1) -> list[int]:
        """The hash of each page of a prefix: each one names every page before it too. From
        ``parent``, the hash of the page before ``keys[0]``, to continue a chain."""
        hashes = []
        for key in keys:
            parent = self._chains.setdefault((parent, key), len(self._chains))
            hashes.append(parent)
        return hashes

    def lookup(self, hashes: Sequence[int]) -> list[int]:
        """The cached pages of the longest prefix of ``hashes`` the cache still holds."""
        pages = []
        for h in hashes:
            page = self._cached.get(h)
            if page is None:
                break
            pages.append(page)
        return pages

    def can_allocate(self, count: int, keep_free: int = 0) -> bool:
        return count >= 0 and count + keep_free <= len(self._free)

    def allocate(self, count: int) -> list[int]:
        """Take ``count`` fresh pages, evicting whatever they cached."""
        if not self.can_allocate(count):
            raise PoolError(f"over-allocation: {count} pages asked, {len(self._free)} free")
        pages = []
        for _ in range(count):
            page, _ = self._free.popitem(last=False)
            h = self._hash_of.pop(page, None)
            if h is not None:  # its content is overwritten: no later hit may find it (PAGE-6)
                del self._cached[h]
            self.ref[page] = 1
            pages.append(page)
        return pages

    def share(self, pages: Sequence[int]) -> None:
        """Take cached pages by reference: a free one leaves the free queue, uncomputed."""
        for page in pages:
            if page not in self._hash_of:
                raise PoolError(f"cache hit on page {page}, which caches nothing")
            if self.ref.get(page, 0) == 0:
                del self._free[page]
            self.ref[page] = self.ref.get(page, 0) + 1

    def register(self, page: int, h: int) -> None:
        """Page ``page`` is now full: cache it under chain hash ``h`` (first writer wins)."""
        if page in self._hash_of or h in self._cached:
            return
        self._hash_of[page] = h
        self._cached[h] = page

    def release(self, pages: Sequence[int]) -> None:
        """Drop one reference to each page; a page nobody holds joins the free queue's back.

        Released tail first, as vLLM does, so a request's last pages are evicted before its
        prefix, which other requests are likelier to share.
        """
        for page in reversed(pages):
            count = self.ref.get(page, 0)
            if count < 1:
                raise PoolError(f"double free: page {page} is not held")
            if count == 1:
                del self.ref[page]
                self._free[page] = None
            else:
                self.ref[page] = count - 1
