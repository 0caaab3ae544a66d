"""``allocate_kv_pages`` checked as a property over its whole domain, not on a fixed list."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from kvsched.checks.judge.allocator import CORNER_CASES, LARGE_CASES, VALUE_CASES, check_allocator
from kvsched.checks.targets.deadline import Deadline
from kvsched.reference import allocate_kv_pages


def _old_public_list() -> list[tuple[int, int | None]]:
    """The list the check used to be: the corners, the large cases and a seeded sample."""
    rng = random.Random(20261130)
    sampled = [
        (rng.getrandbits(rng.randint(1, 128)), rng.getrandbits(rng.randint(1, 64)) or 1)
        for _ in range(40)
    ]
    return [*CORNER_CASES, *LARGE_CASES, *sampled]


ANSWERS = {(t, p or 16): allocate_kv_pages(t, p or 16) for t, p in _old_public_list()}


def exact_on_the_old_list_only(tokens: int, page_size: int = 16) -> dict[str, int]:
    """Looks the old public list up; anywhere else, one page too many."""
    if (tokens, page_size) in ANSWERS:
        return ANSWERS[(tokens, page_size)]
    pages = tokens // page_size + 1
    return {
        "pages": pages,
        "capacity": pages * page_size,
        "wastedSlots": pages * page_size - tokens,
    }


def test_an_allocator_exact_only_on_the_old_public_list_fails() -> None:
    verdict = check_allocator(exact_on_the_old_list_only, Deadline(5.0))
    assert verdict.finding is not None and verdict.finding.invariant == "PAGE-1"
    assert verdict.calls > len(VALUE_CASES)  # past the explicit examples, into drawn inputs


class Spy:
    """The reference allocator, recording every input it is called with."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> Any:
        self.seen.append(args)
        return allocate_kv_pages(*args)


def _inputs(seed: int | None) -> list[tuple[Any, ...]]:
    spy = Spy()
    verdict = check_allocator(spy, Deadline(5.0), examples=200, seed=seed)
    assert verdict.finding is None and verdict.calls == len(spy.seen)
    return spy.seen


def test_the_inputs_drawn_vary_with_the_seed_and_replay_with_it() -> None:
    assert _inputs(1) == _inputs(1)
    assert _inputs(1) != _inputs(2)
    assert _inputs(None) == _inputs(None)  # derandomized without a seed, as ci is


def test_the_inputs_reach_every_magnitude_and_both_sides_of_page_boundaries() -> None:
    seen = [args for args in _inputs(7) if all(type(a) is int and a >= 0 for a in args)]
    tokens = [args[0] for args in seen]
    assert max(tokens).bit_length() > 128
    assert any(args[0] > 2**53 and len(args) == 1 for args in seen)  # the default page size
    sizes = [(args[0], args[1] if len(args) > 1 else 16) for args in seen]
    assert any(t % p == 0 and t > 2**64 for t, p in sizes)
    assert any(t % p == p - 1 and t > 2**64 for t, p in sizes)
    assert any(t % p == 1 and t > 2**64 for t, p in sizes)


def test_every_call_is_counted() -> None:
    verdict = check_allocator(allocate_kv_pages, Deadline(5.0), examples=50)
    # The explicit examples, the drawn ones and the inputs outside the domain.
    assert len(VALUE_CASES) + 50 <= verdict.calls <= len(VALUE_CASES) + 50 + 10


@pytest.mark.parametrize("wrong_from", [2**64, 2**100, 2**1000], ids=["2**64", "2**100", "2**1000"])
def test_a_fault_only_far_past_the_explicit_examples_is_found_and_shrunk(wrong_from: int) -> None:
    def wraps(tokens: int, page_size: int = 16) -> dict[str, int]:
        answer = allocate_kv_pages(tokens, page_size)
        if tokens >= wrong_from and (tokens, page_size) not in ANSWERS:
            return {**answer, "wastedSlots": answer["wastedSlots"] + 1}
        return answer

    finding = check_allocator(wraps, Deadline(5.0)).finding
    assert finding is not None and finding.invariant == "PAGE-1"
    assert "'wastedSlots' must be capacity - tokens" in finding.message
    # Shrunk towards the smallest input that shows it: a few bits past where it starts.
    shown = re.match(r"allocate_kv_pages\((\d+)", finding.message)
    assert shown is not None, finding.message
    assert wrong_from <= int(shown[1]) < wrong_from << 16


def test_an_allocator_exact_only_to_an_80_digit_decimal_fails() -> None:
    """Exact far past any float and any 64-bit int, to about 2**266, and no further: the
    exercise asks for any size of int."""
    import decimal

    def decimal_80(tokens: int, page_size: int = 16) -> dict[str, int]:
        with decimal.localcontext() as context:
            context.prec = 80
            pages = int(
                (decimal.Decimal(tokens) / decimal.Decimal(page_size)).to_integral_value(
                    rounding=decimal.ROUND_CEILING
                )
            )
        return {
            "pages": pages,
            "capacity": pages * page_size,
            "wastedSlots": pages * page_size - tokens,
        }

    assert decimal_80(2**200 + 1, 3) == allocate_kv_pages(2**200 + 1, 3)  # exact this far
    finding = check_allocator(decimal_80, Deadline(5.0)).finding
    assert finding is not None and finding.invariant == "PAGE-1"
