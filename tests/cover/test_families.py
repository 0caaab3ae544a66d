"""The randomized workload families: valid, deterministic, and shaped as their names say."""

from __future__ import annotations

import hashlib
import json

import pytest

from kvsched.reference.families import (
    FAMILIES,
    HEAVY_CAP,
    SCALE,
    Family,
    family_named,
    generate,
)
from kvsched.spec.workload import parse_workload, peak_pages, workload_to_json


def digest(family: str, size: int, seed: int) -> str:
    document = workload_to_json(generate(family, size, seed))
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_loader_accepts_every_family(name: str) -> None:
    workload = generate(name, 500, seed=3)
    assert parse_workload(workload_to_json(workload)) == workload
    assert len(workload.requests) == 500


def test_same_arguments_same_workload() -> None:
    assert generate("bursty-heavy-tight", 300, 5) == generate("bursty-heavy-tight", 300, 5)
    assert generate("bursty-heavy-tight", 300, 5) != generate("bursty-heavy-tight", 300, 6)


def test_pinned_digests() -> None:
    # Pinned so that a change in how workloads are drawn is seen here before it moves the
    # benchmark figures (benchmarks/families.py) that track these workloads across commits.
    assert digest("poisson-short-tight", 100, 0) == PINNED["poisson-short-tight"]
    assert digest("bursty-long-roomy", 100, 0) == PINNED["bursty-long-roomy"]
    assert digest("poisson-heavy-roomy", 100, 0) == PINNED["poisson-heavy-roomy"]


PINNED = {
    "poisson-short-tight": "5b2a77a123415f0e",
    "bursty-long-roomy": "ce5c9d1288e6686f",
    "poisson-heavy-roomy": "997a579dfb9daa15",
}


def test_arrivals_are_sorted_and_bursty_arrivals_cluster() -> None:
    poisson = [r.arrival for r in generate("poisson-short-roomy", 2000, 1).requests]
    bursty = [r.arrival for r in generate("bursty-short-roomy", 2000, 1).requests]
    assert poisson == sorted(poisson) and bursty == sorted(bursty)
    # Bursts put many requests on one iteration; a Poisson process at rate ~3.7 rarely does.
    busiest = {
        name: max(times.count(t) for t in set(times))
        for name, times in (("poisson", poisson), ("bursty", bursty))
    }
    assert busiest["bursty"] > 2 * busiest["poisson"]


def test_length_classes() -> None:
    long = generate("poisson-long-roomy", 2000, 2).requests
    mean_output = sum(r.output_tokens for r in long) / len(long)
    assert 190 <= mean_output <= 210
    heavy = generate("poisson-heavy-roomy", 5000, 2).requests
    outputs = sorted(r.output_tokens for r in heavy)
    assert outputs[0] >= 8 and outputs[-1] <= HEAVY_CAP
    assert outputs[-1] > 20 * outputs[len(outputs) // 2]  # a tail far beyond the median


def test_pools() -> None:
    roomy = generate("poisson-long-roomy", 500, 4)
    tight = generate("poisson-long-tight", 500, 4)
    size = roomy.limits.page_size
    largest = max(peak_pages(r, size) for r in roomy.requests)
    assert roomy.limits.pool_pages == roomy.limits.batch_limit * largest
    mean_peak = sum(peak_pages(r, size) for r in tight.requests) / len(tight.requests)
    assert tight.limits.pool_pages < tight.limits.batch_limit * mean_peak


def test_scale_family_has_the_large_replay_shape() -> None:
    workload = generate(SCALE, 5000, 0)
    assert workload.limits.batch_limit == 256
    assert 190 <= sum(r.output_tokens for r in workload.requests) / 5000 <= 210
    assert family_named("scale") is SCALE


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="unknown workload family 'poisson'"):
        generate("poisson", 10, 0)
    with pytest.raises(ValueError, match="size must be a positive int"):
        generate("poisson-short-tight", 0, 0)
    with pytest.raises(ValueError, match="pool must be one of"):
        generate(Family("odd", "poisson", "short", "snug"), 10, 0)
