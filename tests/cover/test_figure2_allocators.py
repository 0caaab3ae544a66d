"""The buddy allocator, the reservation rules and the slot categories on hand-sized runs
(docs/figure2.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsched.reference.buddy import BuddyAllocator, BuddyError, block_for
from kvsched.reference.reservation import measure, reserved_output
from kvsched.spec.vocabulary import RESERVATIONS, Reservation
from kvsched.spec.workload import Limits, Request, Workload


def test_a_block_is_the_next_power_of_two() -> None:
    assert [block_for(n) for n in (0, 1, 2, 3, 25, 32, 33, 2048, 2049)] == [
        1, 1, 2, 4, 32, 32, 64, 2048, 4096,
    ]  # fmt: skip


def test_an_arena_not_a_power_of_two_holds_as_many_chunks_as_its_decomposition() -> None:
    # 15,696 = 8,192 + 4,096 + 2,048 + 1,360 slots: seven chunks of 2,048, as Orca (Max) gets.
    arena = BuddyAllocator(15_696)
    offsets = [arena.allocate(2048)[0] for _ in range(7)]
    assert sorted(offsets) == [i * 2048 for i in range(7)]
    assert not arena.can_allocate(2048)
    assert arena.free_slots == 15_696 - 7 * 2048
    with pytest.raises(BuddyError):
        arena.allocate(2048)


def test_free_slots_can_be_too_scattered_for_a_request_external_fragmentation() -> None:
    arena = BuddyAllocator(64)
    blocks = [arena.allocate(16)[0] for _ in range(4)]
    arena.free(blocks[0])
    arena.free(blocks[2])  # 32 slots free, but not buddies: no block of 32
    assert arena.free_slots == 32
    assert not arena.can_allocate(32)
    arena.free(blocks[1])  # 0 and 16 merge into 32, then with nothing else
    assert arena.allocate(32) == (0, 32)


def test_a_foreign_or_double_free_raises() -> None:
    arena = BuddyAllocator(64)
    offset, _ = arena.allocate(10)
    arena.free(offset)
    with pytest.raises(BuddyError):
        arena.free(offset)
    with pytest.raises(BuddyError):
        arena.free(3)


@given(st.integers(1, 3000), st.lists(st.tuples(st.booleans(), st.integers(1, 700)), max_size=60))
def test_blocks_are_aligned_disjoint_and_merge_back(size: int, ops: list[tuple[bool, int]]) -> None:
    arena, held = BuddyAllocator(size), dict[int, int]()
    for take, n in ops:
        if take and arena.can_allocate(n):
            offset, block = arena.allocate(n)
            assert block == block_for(n) and offset % block == 0 and offset + block <= size
            assert all(offset + block <= o or o + b <= offset for o, b in held.items())
            held[offset] = block
        elif not take and held:
            arena.free(min(held))
            del held[min(held)]
        assert arena.free_slots + sum(held.values()) == size
    for offset in list(held):
        arena.free(offset)
    assert arena.free_slots == size and arena.largest_free == arena.largest_block


def _request(prompt: int, output: int) -> Request:
    return Request("r", 0, prompt, output)


def test_oracle_reserves_exactly_the_output_pow2_rounds_max_fills_the_model() -> None:
    assert reserved_output("orca-oracle", _request(100, 25), 2048) == 25
    assert reserved_output("orca-pow2", _request(100, 25), 2048) == 32  # the paper's example
    assert reserved_output("orca-pow2", _request(100, 32), 2048) == 32
    assert reserved_output("orca-pow2", _request(1000, 1040), 2048) == 1048  # the model's cap
    assert reserved_output("orca-max", _request(100, 25), 2048) == 1948
    with pytest.raises(ValueError, match="pages"):
        reserved_output("vllm", _request(100, 25), 2048)


def _two(output: int, pool_pages: int = 1) -> Workload:
    requests = (Request("a", 0, 10, output), Request("b", 0, 10, output))
    return Workload("two", Limits(batch_limit=4, page_size=16, pool_pages=pool_pages), requests)


def test_oracle_counts_by_hand() -> None:
    # a takes a block of 16 for 10 + 2 slots; b waits both iterations a runs, then runs alone.
    run = measure("orca-oracle", _two(2))
    assert (run.iterations, run.all_iterations) == (2, 4)
    assert (run.token_states, run.reserved, run.internal) == (11 + 12, 1 + 0, 0)
    assert (run.rounding, run.free) == (4 + 4, 0)
    assert run.mean_batch == 1


def test_pow2_over_reservation_is_internal_fragmentation() -> None:
    run = measure("orca-pow2", _two(3))  # 3 -> 4 output slots: one never written
    assert (run.token_states, run.reserved, run.internal, run.rounding) == (
        11 + 12 + 13,
        2 + 1 + 0,
        3 * 1,
        3 * 2,
    )


def test_paging_holds_less_than_a_page_beyond_the_tokens() -> None:
    # Two pages: a and b both run; a's growth into a second page preempts b (the latest).
    run = measure("vllm", _two(8, pool_pages=2))
    assert run.preemptions >= 1
    slack = run.reserved + run.internal
    assert slack < run.batched * 16
    assert run.rounding == 0


@pytest.mark.parametrize("reservation", RESERVATIONS)
def test_a_request_longer_than_the_model_is_refused(reservation: Reservation) -> None:
    workload = Workload("long", Limits(4, 16, 200), (Request("a", 0, 2000, 100),))
    with pytest.raises(ValueError, match="maximum length 2048"):
        measure(reservation, workload)


def test_a_request_without_output_is_refused() -> None:
    workload = Workload("none", Limits(4, 16, 200), (Request("a", 0, 20, 0),))
    with pytest.raises(ValueError, match="no output token"):
        measure("orca-oracle", workload)
