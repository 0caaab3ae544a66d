"""The axes of a workload are written down once (checks/search/strategies.py, ``AXES``): one per
field of a request and of the limits, inside what the contract allows, and what the search's
sizes and shares say is derived from them."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import find, given, settings

from kvsched.checks.search.corners import LONG_CONTEXT_PAGES
from kvsched.checks.search.explore import _shares
from kvsched.checks.search.strategies import (
    AXES,
    FAR_SHARE,
    SEARCH_SIZES,
    far_workloads,
    search_workloads,
    workloads,
)
from kvsched.spec.bounds import LIMIT_FIELDS, REQUEST_NUMBERS
from kvsched.spec.request_fields import MAX_PRIORITY
from kvsched.spec.vocabulary import PROFILE_NAMES, Profile
from kvsched.spec.workload import Limits, Request, Workload, parse_workload, peak_pages
from kvsched.spec.workload import workload_to_json as to_json


def test_every_field_of_a_request_and_of_the_limits_has_an_axis() -> None:
    # A field added to Request or Limits fails here until its range is written into AXES.
    assert {f.name for f in (*fields(Request), *fields(Limits))} == set(AXES)


@pytest.mark.parametrize("name", sorted(AXES))
def test_each_axis_grows_from_small_to_its_far_end_with_the_profile(name: str) -> None:
    axis = AXES[name]
    assert len(axis.far) == len(PROFILE_NAMES)
    assert axis.low <= axis.small <= axis.far[0]
    assert list(axis.far) == sorted(axis.far)  # ci <= dev <= thorough


@pytest.mark.parametrize("name", [*REQUEST_NUMBERS, *LIMIT_FIELDS])
def test_the_axes_stay_inside_what_the_contract_allows(name: str) -> None:
    low, high = (REQUEST_NUMBERS | LIMIT_FIELDS)[name]
    axis = AXES[name]
    assert low <= axis.low and max(axis.far) <= high


def test_the_far_priority_is_the_contracts_bound() -> None:
    assert AXES["priority"].far_end("ci") == MAX_PRIORITY


@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_the_search_sizes_are_the_axes_far_ends(profile: Profile) -> None:
    sizes = SEARCH_SIZES[profile]
    assert sizes["max_requests"] == AXES["id"].far_end(profile)
    assert sizes["max_output"] == AXES["output_tokens"].far_end(profile)
    assert sizes["max_page_size"] == AXES["page_size"].far_end(profile)
    assert sizes["max_batch_limit"] == AXES["batch_limit"].far_end(profile)
    assert sizes["max_priority"] == AXES["priority"].far_end(profile)


def test_one_example_in_far_share_of_a_search_is_a_far_workload() -> None:
    [(main, ordinary), (far, count)] = _shares(None, "ci", 97)
    assert (ordinary, count) == (97 - 97 // FAR_SHARE, 97 // FAR_SHARE) and count >= 9
    assert repr(main) == repr(search_workloads("ci")) and repr(far) == repr(far_workloads("ci"))
    mine = workloads()
    assert _shares(mine, "ci", 97) == [(mine, 97)]  # a caller's own strategy is drawn alone
    assert [count for _, count in _shares(None, "ci", 5)] == [5]  # too few for a share


def test_a_far_workload_shrinks_to_one_request_of_the_fewest_pages() -> None:
    simplest = find(far_workloads("ci"), lambda _: True, settings=settings(database=None))
    assert len(simplest.requests) == 1
    [request] = simplest.requests
    assert peak_pages(request, simplest.limits.page_size) == LONG_CONTEXT_PAGES
    assert simplest.limits == Limits(batch_limit=1, page_size=1, pool_pages=LONG_CONTEXT_PAGES)


@given(far_workloads("ci"))
def test_every_far_workload_is_valid_and_every_table_long(workload: Workload) -> None:
    assert parse_workload(to_json(workload)) == workload
    peaks = [peak_pages(r, workload.limits.page_size) for r in workload.requests]
    assert min(peaks) >= LONG_CONTEXT_PAGES and max(peaks) <= workload.limits.pool_pages
