"""The reservation family: how much KV memory a request is given, and a run of each
(docs/figure2.md; the vocabulary is :data:`kvsched.spec.vocabulary.Reservation`).

The three Orca baselines of the vLLM paper give each admitted request one contiguous chunk from
a :class:`~.buddy.BuddyAllocator` for its prompt plus a reserved output, held until it finishes:
``orca-max`` reserves up to the model's maximum length, ``orca-pow2`` the true output rounded up
to a power of two (at most twice it: 25 -> 32), ``orca-oracle`` exactly the true output. Each
admits first come, first served, stops at the first request whose chunk does not fit, and never
preempts: the reservation guarantees the request its room.

``vllm`` takes 16-token pages from a :class:`~.pool.PagePool` as tokens come. Admission, as in
the paper's vLLM, needs the pages of the prompt (and of the output computed before a
preemption, plus the token of the iteration) with 1% of the pool left free; a running request
that needs a page when none is free preempts the latest admitted request (recompute: its pages
are freed and it returns to the head of the queue), and nothing is admitted in that iteration.

An iteration admits, then every request in the batch computes one token (an admitted one its
prompt too), then the pool is counted (:mod:`.memory_use`), then finished requests free.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from kvsched.spec.vllm_paper import MAX_MODEL_LEN
from kvsched.spec.vocabulary import Reservation, assert_never
from kvsched.spec.workload import Request, Workload, pages_for

from .buddy import BuddyAllocator, block_for
from .memory_use import Held, MemoryShares, Tally
from .pool import PagePool

WATERMARK = 0.01
"""The share of the pool vLLM's admission leaves free (its block manager's default)."""


def reserved_output(reservation: Reservation, request: Request, max_len: int) -> int:
    """Output slots a contiguous reservation sets aside for ``request``."""
    prompt, output = request.prompt_tokens, request.output_tokens
    if reservation == "orca-max":
        return max_len - prompt
    if reservation == "orca-pow2":
        return min(block_for(output), max_len - prompt)
    if reservation == "orca-oracle":
        return output
    if reservation == "vllm":
        raise ValueError("vllm reserves no output: it takes pages as tokens come")
    assert_never(reservation)


def measure(
    reservation: Reservation, workload: Workload, max_len: int = MAX_MODEL_LEN
) -> MemoryShares:
    """Run ``workload`` with ``reservation`` and count its pool, slot by slot."""
    for index, request in enumerate(workload.requests):
        if request.output_tokens < 1:
            raise ValueError(f"request #{index} ({request.id!r}): no output token to compute")
        if request.prompt_tokens + request.output_tokens > max_len:
            raise ValueError(
                f"request #{index} ({request.id!r}): {request.prompt_tokens} prompt + "
                f"{request.output_tokens} output tokens exceed the maximum length {max_len}"
            )
    if reservation == "vllm":
        return _paged(workload)
    return _contiguous(reservation, workload, max_len)


class _Queue:
    """Requests by arrival; those arrived by the current iteration wait in ``waiting``."""

    def __init__(self, requests: tuple[Request, ...]) -> None:
        self.coming = deque(sorted(requests, key=lambda r: r.arrival))
        self.waiting: deque[Held] = deque()

    def arrive(self, time: int) -> None:
        while self.coming and self.coming[0].arrival <= time:
            self.waiting.append(Held(self.coming.popleft(), 0, 0, 0, 0))

    @property
    def done(self) -> bool:
        return not self.coming and not self.waiting


def _contiguous(reservation: Reservation, workload: Workload, max_len: int) -> MemoryShares:
    limits = workload.limits
    arena = BuddyAllocator(limits.pool_pages * limits.page_size)
    asks = {
        r.id: r.prompt_tokens + reserved_output(reservation, r, max_len) for r in workload.requests
    }
    too_big = [r.id for r in workload.requests if block_for(asks[r.id]) > arena.largest_block]
    if too_big:
        raise ValueError(f"{too_big[0]!r} needs a block larger than the arena's largest")
    queue, batch, tally, time = _Queue(workload.requests), list[Held](), Tally(arena.size), 0
    while not queue.done or batch:
        queue.arrive(time)
        while queue.waiting and len(batch) < limits.batch_limit:
            head = queue.waiting[0]
            ask = asks[head.request.id]
            if not arena.can_allocate(ask):
                break  # first come, first served: the head blocks the queue
            offset, size = arena.allocate(ask)
            head.requested, head.slots, head.handle = ask, size, offset
            batch.append(queue.waiting.popleft())
        batch = _step(batch, queue, tally, lambda h: arena.free(_offset(h)))
        time += 1
    return tally.shares(reservation, time, 0)


def _paged(workload: Workload) -> MemoryShares:
    limits = workload.limits
    pool, size = PagePool(limits.pool_pages), limits.page_size
    watermark = int(WATERMARK * limits.pool_pages)
    too_big = [
        r.id
        for r in workload.requests
        if pages_for(r.prompt_tokens + r.output_tokens, size) > limits.pool_pages - watermark
    ]
    if too_big:
        raise ValueError(f"{too_big[0]!r} needs more pages than the pool has")
    queue, batch, tally = _Queue(workload.requests), list[Held](), Tally(limits.pool_pages * size)
    time = preemptions = 0
    while not queue.done or batch:
        queue.arrive(time)
        preempted, index = 0, 0
        while index < len(batch):  # in admission order; victims leave from the end
            h = batch[index]
            if h.request.prompt_tokens + h.generated < h.slots:
                index += 1  # this iteration's token fits its pages
                continue
            more = pages_for(h.kv + 1, size) - len(_pages(h))
            while more > pool.free_count and index < len(batch):
                victim = batch.pop()
                pool.free(victim.request.id, _pages(victim))
                victim.handle, victim.requested, victim.slots = [], 0, 0
                queue.waiting.appendleft(victim)
                preempted += 1
            if index < len(batch) and more > 0:  # h itself was not the victim
                _pages(h).extend(pool.allocate(h.request.id, more))
                h.requested = h.slots = len(_pages(h)) * size
            index += 1
        preemptions += preempted
        while not preempted and queue.waiting and len(batch) < limits.batch_limit:
            head = queue.waiting[0]
            need = pages_for(head.kv + 1, size)
            if need > pool.free_count - watermark:
                break
            head.handle = pool.allocate(head.request.id, need)
            head.requested = head.slots = need * size
            batch.append(queue.waiting.popleft())
        batch = _step(batch, queue, tally, lambda h: pool.free(h.request.id, _pages(h)))
        time += 1
    return tally.shares("vllm", time, preemptions)


def _step(
    batch: list[Held], queue: _Queue, tally: Tally, free: Callable[[Held], None]
) -> list[Held]:
    """Every request computes one token, the pool is counted while requests wait, and the
    finished free; the batch that goes on."""
    assert batch or queue.coming, "requests wait, yet none could be admitted to an empty batch"
    for h in batch:
        h.generated += 1
    if queue.waiting:
        tally.observe(batch)
    going = []
    for h in batch:
        if h.generated == h.request.output_tokens:
            free(h)
        else:
            going.append(h)
    return going


def _offset(h: Held) -> int:
    assert isinstance(h.handle, int)
    return h.handle


def _pages(h: Held) -> list[int]:
    assert isinstance(h.handle, list)
    return h.handle
