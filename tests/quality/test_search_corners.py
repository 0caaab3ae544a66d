"""The search reaches the corners where real engines broke (checks/search/corners.py), as its own
statistics say: each corner is a Hypothesis ``event`` of the search's test cases, read back
through Hypothesis's observability callbacks from one ci search of a correct engine scheduler
under priority order, the design whose corners are the widest (priorities, a prefix cache, lazy
pages, preemption). Counted over the generated test cases only: the boundary shapes, run first as
explicit examples, are counted apart, so a corner reached only by them says so here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from hypothesis.internal.observability import with_observability_callback

from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.mutants.corners import PriorityV1
from kvsched.checks.mutants.engine import V1
from kvsched.checks.search.corners import BOUNDARY_SHAPES, TARGETED, drawn_corners, run_corners
from kvsched.checks.search.explore import search
from kvsched.checks.search.strategies import FEATURES
from kvsched.reference.engine import run
from kvsched.spec.workload import parse_workload, workload_to_json

AT_LEAST = 5
"""Generated test cases of the ci search (100 and those the target phase adds) that must reach
each corner."""

FEATURE_CORNERS: dict[str, tuple[str, ...]] = {
    "priorities": ("priority inversion", "a low-priority request running ahead of a high one"),
    "page_boundaries": ("prompt at a page multiple", "prompt one below", "prompt one above"),
    "full_hits": ("whole-prompt prefix hit shape", "full prefix hit"),
    "near_pool": ("a request within a page of the pool",),
    "tight_pool": ("admission leaving no page free", "preemption"),
    "bursts": ("a burst larger than the batch",),
    "long_runs": ("long run",),
}
"""The corner events each swarm feature exists to produce (the others' corners are counted on
drawn workloads by tests/quality/test_strategies.py)."""

ONLY_BY_SHAPES = ("preemption of a request running ahead",)
"""Corners the generated test cases of the ci search do not reach (none of its 100 under this
design): the boundary shapes carry them, and targeting climbs from there in deeper profiles."""


# One worker runs this whole module (tests/conftest.py, WHOLE_MODULES): its searches run once.
@pytest.fixture(scope="module")
def statistics() -> tuple[Counter[str], Counter[str]]:
    """Corner events of the ci search: over generated test cases, and over explicit examples."""
    generated: Counter[str] = Counter()
    explicit: Counter[str] = Counter()

    def count(observation: Any) -> None:
        if getattr(observation, "type", "") != "test_case":
            return
        tally = explicit if observation.how_generated == "explicit example" else generated
        tally.update(list(observation.features))

    with with_observability_callback(count):
        result = search(PriorityV1, "continuous", "ci", properties=PriorityV1.properties)
    assert result.clean  # the design is correct: every example ran to its end
    return generated, explicit


def test_every_feature_is_a_swarm_feature() -> None:
    assert set(FEATURE_CORNERS) <= set(FEATURES)


@pytest.mark.parametrize(
    "corner",
    [c for corners in FEATURE_CORNERS.values() for c in corners],
)
def test_the_ci_search_reaches_each_corner(
    corner: str, statistics: tuple[Counter[str], Counter[str]]
) -> None:
    generated, _ = statistics
    assert generated[corner] >= AT_LEAST, f"{corner!r} in {generated[corner]} test cases"


@pytest.mark.parametrize("corner", ONLY_BY_SHAPES)
def test_the_boundary_shapes_reach_what_generation_misses(
    corner: str, statistics: tuple[Counter[str], Counter[str]]
) -> None:
    _, explicit = statistics
    assert explicit[corner] >= 1


def test_the_search_targets_its_corners(statistics: tuple[Counter[str], Counter[str]]) -> None:
    generated, _ = statistics
    for corner in TARGETED:
        assert generated[f"target:{corner}"] >= AT_LEAST, corner


@pytest.mark.parametrize("shape", BOUNDARY_SHAPES, ids=[s.name for s in BOUNDARY_SHAPES])
def test_each_boundary_shape_is_valid_and_clean_on_the_correct_designs(shape: Any) -> None:
    assert parse_workload(workload_to_json(shape)) == shape
    for design in (V1, PriorityV1):
        # as the search runs it: the null page beside the shape's pool
        limits = replace(shape.limits, pool_pages=shape.limits.pool_pages + 1)
        declared = design.properties
        result = run(replace(shape, limits=limits), design, declared.policy, properties=declared)
        assert watch_run(result, design.properties)[0] is None


SHAPE_CORNERS = {
    "full hit on a page multiple": ("whole-prompt prefix hit shape", "full prefix hit"),
    "priority victim scheduled ahead": (
        "priority inversion",
        "preemption of a request running ahead",
    ),
    "revived pages at zero free": ("preemption", "full prefix hit"),
    "prefix ending inside a page": ("a prefix ending inside a page",),
    "hit at the front of the free queue": ("a hit on freed pages",),
}


@pytest.mark.parametrize("shape", BOUNDARY_SHAPES, ids=[s.name for s in BOUNDARY_SHAPES])
def test_each_boundary_shape_shows_its_corner(shape: Any) -> None:
    limits = replace(shape.limits, pool_pages=shape.limits.pool_pages + 1)
    result = run(replace(shape, limits=limits), PriorityV1, properties=PriorityV1.properties)
    reached = set(drawn_corners(shape)) | set(
        +run_corners(shape, result.events, limits.pool_pages - 1)
    )
    assert set(SHAPE_CORNERS[shape.name]) <= reached
