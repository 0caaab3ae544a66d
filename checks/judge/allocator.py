"""Checking a learner's ``allocate_kv_pages`` directly against spec/semantics.md, section 2.

The function is small enough to check exactly: a table of cases that covers the lesson's corners
(0 tokens, a page filled exactly, a page filled partway, page size 1, the default page size) and
the inputs it must refuse (a negative count, a zero page size, a float, a string, a bool). The
first wrong answer becomes a PAGE-1 finding, since PAGE-1 ("pages are minimal, wasted < page
size") is the invariant this function computes; the message shows the call, what came back and
what section 2 expects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.targets.deadline import CallTimeout, Deadline
from kvsched.checks.verdict.report import AllocatorVerdict
from kvsched.reference.pages import allocate_kv_pages as reference_allocate

# (tokens, page_size); None means "use the default page size of 16".
VALUE_CASES: tuple[tuple[int, int | None], ...] = (
    (0, None), (1, None), (15, None), (16, None), (17, None), (32, None), (33, None),
    (0, 1), (1, 1), (7, 1), (0, 4), (4, 4), (5, 4), (8, 4), (9, 3), (100, 7), (4096, 16),
    (1, 1000), (999, 1000), (1000, 1000), (1001, 1000),
)  # fmt: skip

# (tokens, page_size, the exception section 2 asks for)
BAD_INPUTS: tuple[tuple[Any, Any, type[Exception]], ...] = (
    (-1, 16, ValueError),
    (5, 0, ValueError),
    (5, -16, ValueError),
    (2.5, 16, TypeError),
    ("33", 16, TypeError),
    (True, 16, TypeError),
    (None, 16, TypeError),
    (33, 16.0, TypeError),
    (33, "16", TypeError),
    (33, False, TypeError),
)

RESULT_KEYS = ("pages", "capacity", "wastedSlots")


def check_allocator(allocate: Callable[..., Any], deadline: Deadline) -> AllocatorVerdict:
    """Call ``allocate`` on every case and report the first answer section 2 does not allow."""
    calls = 0
    for tokens, page_size in VALUE_CASES:
        calls += 1
        args: tuple[Any, ...] = (tokens,) if page_size is None else (tokens, page_size)
        expected = reference_allocate(*args)
        call = _call_text(args)
        try:
            answer = deadline.call(call, allocate, *args)
        except CallTimeout as timeout:
            return AllocatorVerdict(calls, _finding("PROTO-1", str(timeout)))
        except Exception as error:
            return AllocatorVerdict(
                calls,
                _finding(
                    "PAGE-1",
                    f"{call} raised {type(error).__name__}: {error}; it should return {expected}.",
                ),
            )
        problem = _wrong_answer(answer, expected, tokens, page_size or 16)
        if problem:
            return AllocatorVerdict(
                calls, _finding("PAGE-1", f"{call} returned {answer!r}: {problem}")
            )
    for tokens, page_size, exception in BAD_INPUTS:
        calls += 1
        call = _call_text((tokens, page_size))
        try:
            answer = deadline.call(call, allocate, tokens, page_size)
        except CallTimeout as timeout:
            return AllocatorVerdict(calls, _finding("PROTO-1", str(timeout)))
        except exception:
            continue
        except Exception as error:
            message = (
                f"{call} raised {type(error).__name__}; section 2 asks for {exception.__name__} "
                f"({_why(tokens, page_size)})."
            )
            return AllocatorVerdict(calls, _finding("PAGE-1", message))
        message = (
            f"{call} returned {answer!r}; it should raise {exception.__name__} "
            f"({_why(tokens, page_size)})."
        )
        return AllocatorVerdict(calls, _finding("PAGE-1", message))
    return AllocatorVerdict(calls, None)


def _wrong_answer(answer: Any, expected: dict[str, int], tokens: int, page_size: int) -> str:
    if not isinstance(answer, dict):
        return f"it should return a dict like {expected}."
    missing = [key for key in RESULT_KEYS if key not in answer]
    if missing:
        return f"the key '{missing[0]}' is missing; expected {expected}."
    for key in RESULT_KEYS:
        value = answer[key]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"'{key}' must be an int, got {type(value).__name__}; expected {expected}."
    if answer["pages"] != expected["pages"]:
        fewer = answer["pages"] < expected["pages"]
        reason = (
            f"{answer['pages']} pages of {page_size} slots cannot hold {tokens} tokens"
            if fewer
            else f"{tokens} tokens need only {expected['pages']} pages of {page_size} slots; "
            f"{answer['pages']} page{'s' if answer['pages'] != 1 else ''} leave at least one "
            "page with no token in it"
        )
        return f"{reason}; pages = ceil(tokens / page_size) = {expected['pages']}."
    for key in ("capacity", "wastedSlots"):
        if answer[key] != expected[key]:
            rule = "pages * page_size" if key == "capacity" else "capacity - tokens"
            return f"'{key}' must be {rule} = {expected[key]}."
    return ""


def _why(tokens: Any, page_size: Any) -> str:
    for name, value, minimum in (("tokens", tokens, 0), ("page_size", page_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} must be an int, and {value!r} is a {type(value).__name__}"
        if value < minimum:
            return f"{name} must be >= {minimum}"
    return "bad input"


def _call_text(args: tuple[Any, ...]) -> str:
    return f"allocate_kv_pages({', '.join(repr(a) for a in args)})"


def _finding(invariant: str, message: str) -> Finding:
    return Finding(invariant=invariant, iteration=0, message=message)
