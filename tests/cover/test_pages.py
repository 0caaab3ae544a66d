"""allocate_kv_pages: the exercise's contract, exactly (spec/semantics.md section 2)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsched import allocate_kv_pages


@pytest.mark.parametrize(
    ("tokens", "page_size", "expected"),
    [
        (0, 16, {"pages": 0, "capacity": 0, "wastedSlots": 0}),
        (1, 16, {"pages": 1, "capacity": 16, "wastedSlots": 15}),
        (16, 16, {"pages": 1, "capacity": 16, "wastedSlots": 0}),
        (32, 16, {"pages": 2, "capacity": 32, "wastedSlots": 0}),
        (33, 16, {"pages": 3, "capacity": 48, "wastedSlots": 15}),
        (5, 1, {"pages": 5, "capacity": 5, "wastedSlots": 0}),
    ],
)
def test_examples(tokens: int, page_size: int, expected: dict[str, int]) -> None:
    assert allocate_kv_pages(tokens, page_size) == expected


def test_default_page_size_is_16() -> None:
    assert allocate_kv_pages(33) == {"pages": 3, "capacity": 48, "wastedSlots": 15}


@given(st.integers(0, 10**9), st.integers(1, 10**4))
def test_pages_are_minimal_and_waste_below_a_page(tokens: int, page_size: int) -> None:
    result = allocate_kv_pages(tokens, page_size)
    assert result["pages"] == math.ceil(tokens / page_size)
    assert result["capacity"] == result["pages"] * page_size >= tokens
    assert (result["pages"] - 1) * page_size < tokens or result["pages"] == 0
    assert 0 <= result["wastedSlots"] < page_size
    assert result["wastedSlots"] == result["capacity"] - tokens


@pytest.mark.parametrize(
    ("args", "error", "names"),
    [
        ((-1,), ValueError, ["tokens", "-1"]),
        ((1.5,), TypeError, ["tokens", "float", "1.5"]),
        (("3",), TypeError, ["tokens", "str"]),
        ((True,), TypeError, ["tokens", "bool"]),
        ((None,), TypeError, ["tokens", "None"]),
        ((3, 0), ValueError, ["page_size", "0"]),
        ((3, -16), ValueError, ["page_size", "-16"]),
        ((3, 16.0), TypeError, ["page_size", "float"]),
        ((3, False), TypeError, ["page_size", "bool"]),
    ],
)
def test_bad_arguments_are_named(args: tuple[object, ...], error: type, names: list[str]) -> None:
    with pytest.raises(error) as raised:
        allocate_kv_pages(*args)  # type: ignore[arg-type]
    for name in names:
        assert name in str(raised.value)
