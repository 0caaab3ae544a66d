"""Checking a learner's ``allocate_kv_pages`` directly against spec/semantics.md, section 2.

The exercise states its domain as a precondition: ``tokens`` an int >= 0, ``page_size`` a
positive int. Within it every value must be exact, for any size of int, so the check is a
property over that whole domain, run by Hypothesis: the lesson's corners (0 tokens, a page filled
exactly or partway, page size 1, the default page size) and the integers where float division
loses the last unit (2**53 +/- 1, 2**63, 10**30) are explicit examples, tried first on every run;
then Hypothesis draws more, of every bit length up to 4,096, and as often one token either side of
a whole number of pages, against the exact integer reference. A fixed list would pass an
allocator that is exact on that list alone; the drawn inputs change with the run's seed (fixed
under the derandomized ``ci`` profile unless one is given), and the verdict counts every call.
The first wrong answer, shrunk to the smallest input Hypothesis finds, is a PAGE-1 finding,
since PAGE-1 ("pages are minimal, wasted < page size") is what the function computes.

Outside the domain the caller is at fault, not the function: the lesson's own solution does no
validation. What a solution does with a negative count, a float or a bool is therefore advice
(the Pythonic way: TypeError for a wrong type, ValueError for a value out of range), never a
finding, unless ``strict_inputs`` asks for validation to be graded. A call that hangs is PROTO-1
either way: the check cannot go on, and no further call is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, example, given, settings
from hypothesis import strategies as st

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.search.profiles import use_kvsched_cache
from kvsched.checks.search.runs import ALLOCATOR_BITS
from kvsched.checks.targets.deadline import CallTimeout, Deadline
from kvsched.checks.verdict.report import AllocatorVerdict
from kvsched.reference.page_count import allocate_kv_pages as reference_allocate
from kvsched.spec.text import plural

# (tokens, page_size); None means "use the default page size of 16".
CORNER_CASES: tuple[tuple[int, int | None], ...] = (
    (0, None), (1, None), (15, None), (16, None), (17, None), (32, None), (33, None),
    (0, 1), (1, 1), (7, 1), (0, 4), (4, 4), (5, 4), (8, 4), (9, 3), (100, 7), (4096, 16),
    (1, 1000), (999, 1000), (1000, 1000), (1001, 1000),
)  # fmt: skip

# Where float division loses the last unit: ceil(tokens / page_size) is wrong on each of these.
LARGE_CASES: tuple[tuple[int, int | None], ...] = (
    (2**53 - 1, 1), (2**53, 1), (2**53 + 1, 1), (2**53 + 1, 2), (2**53 + 17, None),
    (2**63, None), (2**63 + 1, None), (2**64 - 1, 3), (10**30, None), (10**30 + 1, 7),
    (10**30, 10**15 + 1), (10**300 + 1, 7), (2**4000 + 1, None),
)  # fmt: skip


VALUE_CASES = CORNER_CASES + LARGE_CASES
"""The explicit examples, tried first on every run, in this order."""

MAX_BITS = ALLOCATOR_BITS
"""The longest ints drawn, in bits (:data:`~kvsched.checks.search.runs.ALLOCATOR_BITS`)."""


@st.composite
def value_cases(draw: st.DrawFn) -> tuple[int, int | None]:
    """Inputs within the exercise's domain: any page size (or the default), and a token count
    of any bit length or one token either side of a whole number of pages."""
    page_size = draw(_PAGE_SIZES)
    if page_size == 0:
        page_size = max(_any_bits(draw), 1)
    size = page_size or 16
    kind = draw(_KINDS)
    if kind == "small":
        return draw(st.integers(0, 4 * size)), page_size
    if kind == "any":
        return _any_bits(draw), page_size
    pages = _any_bits(draw)
    return draw(st.integers(max(pages * size - 1, 0), pages * size + 1)), page_size


# Built once: a strategy built anew is validated anew on its first draw (strategies.BUILT).
_PAGE_SIZES = st.one_of(st.none(), st.integers(1, 64), st.just(0))
"""The default page size, one of 1 to 64, or (0) one of any bit length."""
_KINDS = st.sampled_from(("small", "any", "near a page"))


def _any_bits(draw: st.DrawFn) -> int:
    # Drawn in two steps, not with flatmap, whose module Hypothesis imports on first use: the
    # check imports nothing once the target runs (tests/attacks/test_attack_containment.py).
    bits = draw(st.integers(1, MAX_BITS))
    return draw(st.integers(0, 2**bits - 1))


# (tokens, page_size, the exception the Pythonic way raises): outside the exercise's domain.
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


class _Wrong(Exception):
    """Raised inside the property so that Hypothesis shrinks; carries the finding."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def check_allocator(
    allocate: Callable[..., Any],
    deadline: Deadline,
    strict_inputs: bool = False,
    *,
    examples: int = 400,
    seed: int | None = None,
) -> AllocatorVerdict:
    """The explicit examples and ``examples`` drawn inputs exactly, from ``seed`` (None:
    derandomized); then bad inputs as advice, or as findings if ``strict_inputs``."""
    calls = 0
    hung: _Wrong | None = None

    @settings(
        max_examples=examples,
        derandomize=seed is None,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    @given(value_cases())
    def exact(case: tuple[int, int | None]) -> None:
        nonlocal calls, hung
        if hung is not None:  # after a hang, no more calls: shrinking ends at once
            raise hung
        calls += 1
        finding = _judged(allocate, deadline, *case)
        if finding is not None:
            if finding.invariant == "PROTO-1":
                hung = _Wrong(finding)
            raise _Wrong(finding)

    for case in reversed(VALUE_CASES):
        exact = example(case)(exact)
    if seed is not None:
        exact = hypothesis.seed(seed)(exact)
    use_kvsched_cache()  # Hypothesis's files go to the cache folder, not the user's folder
    try:
        exact()
    except _Wrong as wrong:
        return AllocatorVerdict(calls, hung.finding if hung else wrong.finding)
    advice: list[str] = []
    for tokens, page_size, exception in BAD_INPUTS:
        calls += 1
        call = _call_text((tokens, page_size))
        try:
            answer = deadline.call(call, allocate, tokens, page_size)
        except CallTimeout as timeout:
            return AllocatorVerdict(calls, _finding("PROTO-1", str(timeout)), tuple(advice))
        except exception:
            continue
        except Exception as error:
            outcome = f"raised {type(error).__name__}"
        else:
            outcome = f"returned {answer!r}"
        words = (
            f"{call} {outcome}; the Pythonic way is to raise {exception.__name__} "
            f"({_why(tokens, page_size)})."
        )
        if strict_inputs:
            graded = f"{words} Graded because of --strict-inputs."
            return AllocatorVerdict(calls, _finding("PAGE-1", graded), tuple(advice))
        advice.append(words)
    return AllocatorVerdict(calls, None, tuple(advice))


def _judged(
    allocate: Callable[..., Any], deadline: Deadline, tokens: int, page_size: int | None
) -> Finding | None:
    """The finding one call within the domain makes, if its answer is not exact."""
    args: tuple[Any, ...] = (tokens,) if page_size is None else (tokens, page_size)
    expected = reference_allocate(*args)
    call = _call_text(args)
    try:
        answer = deadline.call(call, allocate, *args)
    except CallTimeout as timeout:
        return _finding("PROTO-1", str(timeout))
    except Exception as error:
        return _finding(
            "PAGE-1",
            f"{call} raised {type(error).__name__}: {error}; it should return {expected} "
            "(tokens >= 0 and page_size >= 1 are within the exercise's inputs).",
        )
    problem = _wrong_answer(answer, expected, tokens, page_size or 16)
    return _finding("PAGE-1", f"{call} returned {answer!r}: {problem}") if problem else None


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
            f"{plural(answer['pages'], 'page')} of {plural(page_size, 'slot')} cannot hold "
            f"{plural(tokens, 'token')}"
            if fewer
            else f"{plural(tokens, 'token')} {'needs' if tokens == 1 else 'need'} only "
            f"{plural(expected['pages'], 'page')} of "
            f"{plural(page_size, 'slot')}; "
            f"{plural(answer['pages'], 'page')} leave at least one "
            "page with no token in it"
        )
        hint = (
            " Float division rounds integers above 2**53; (tokens + page_size - 1) // page_size "
            "stays exact."
            if tokens > 2**53
            else ""
        )
        return f"{reason}; pages = ceil(tokens / page_size) = {expected['pages']}.{hint}"
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
