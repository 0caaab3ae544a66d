"""``kvsched replay`` of many requests: the same figures as before, in memory that stays bounded.

The fast path reads requests as columns (reference/columns.py) and a family generates them so
(``generate_columns``); the JSON writer streams the waits. Each must give exactly what the
Request-object path gives, and the replay must not keep a Python object per request.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from dataclasses import replace

import pytest

from kvsched.commands import figures
from kvsched.reference import POLICIES, compute_metrics, run
from kvsched.reference.columns import NumberedIds, Waits, columns_of
from kvsched.reference.families import (
    FAMILIES,
    NAMED,
    SCALE,
    columns_from_spec,
    generate,
    generate_columns,
    workload_from_spec,
)
from kvsched.reference.fastpath import replay, replay_columns
from kvsched.spec.workload import Workload

BYTES_A_REQUEST = 120
"""What the replay of columns may take a request beyond them: its two arrays are 16 bytes; a
Request object alone is about 300."""


@pytest.mark.parametrize("name", [*FAMILIES, *NAMED])
def test_columns_are_the_requests_generate_draws(name: str) -> None:
    workload = generate(name, 200, seed=5)
    drawn = generate_columns(name, 200, seed=5)
    assert drawn.name == workload.name
    assert drawn.limits == workload.limits
    assert list(drawn.ids) == [r.id for r in workload.requests]
    assert list(drawn.arrival) == [r.arrival for r in workload.requests]
    assert list(drawn.prompt) == [r.prompt_tokens for r in workload.requests]
    assert list(drawn.output) == [r.output_tokens for r in workload.requests]
    assert columns_from_spec(f"family:{name}:200:5") == drawn


def shuffled(workload: Workload, seed: int) -> Workload:
    """The same requests declared out of arrival order: the queue must still follow arrivals."""
    requests = list(workload.requests)
    random.Random(seed).shuffle(requests)
    return replace(workload, requests=tuple(requests))


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    "workload",
    [
        generate("poisson-long-tight", 120, 1),
        shuffled(generate("bursty-short-tight", 150, 2), 2),
        replace(shuffled(generate("bursty-heavy-roomy", 150, 4), 4), percentile_method="lower"),
    ],
    ids=lambda w: w.name,
)
def test_columns_replay_gives_the_stepped_figures(workload: Workload, policy: str) -> None:
    stepped = compute_metrics(workload, run(workload, POLICIES[policy]).events)
    assert replay_columns(columns_of(workload), policy) == stepped
    assert replay(workload, policy).metrics == stepped
    assert list(replay_columns(columns_of(workload), policy).waits.items()) == list(
        stepped.waits.items()
    )


def test_waits_read_as_the_mapping_they_stand_for() -> None:
    drawn = generate_columns("bursty-short-roomy", 50, 0)
    waits = replay_columns(drawn, "static").waits
    assert isinstance(waits, Waits)
    as_dict = dict(waits)
    assert waits == as_dict and as_dict == waits
    assert list(waits) == [f"r{i}" for i in range(50)]
    assert waits["r49"] == as_dict["r49"]
    for absent in ("r50", "r01", "r-1", "x1", ""):
        assert absent not in waits
        with pytest.raises(KeyError):
            waits[absent]
    assert sorted(waits.values()) == sorted(as_dict.values())
    named = Waits(("b", "a"), waits.array[:2])
    assert named["a"] == waits.array[1] and list(named) == ["b", "a"]
    assert NumberedIds(3)[-1] == "r2" and NumberedIds(3)[1:] == ["r1", "r2"]


@pytest.mark.parametrize("chunk", [1, 3, figures.SLICE])
def test_streamed_json_is_json_dumps_to_the_byte(
    chunk: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(figures, "SLICE", chunk)
    workload = workload_from_spec("family:bursty-short-tight:40:3")
    fast = {p: replay_columns(columns_of(workload), p) for p in POLICIES}
    stepped = {p: compute_metrics(workload, run(workload, POLICIES[p]).events) for p in POLICIES}
    for metrics in (fast, stepped):
        figures.write_json(metrics)
        expected = json.dumps({p: m.as_dict() for p, m in metrics.items()}, indent=2)
        assert capsys.readouterr().out == expected + "\n"
    empty = {"static": replace(fast["static"], waits={})}
    figures.write_json(empty)
    expected = json.dumps({"static": empty["static"].as_dict()}, indent=2)
    assert capsys.readouterr().out == expected + "\n"


def test_ids_that_need_escaping_are_written_as_json_writes_them() -> None:
    waits = {'a"b': 1, "é": 2, "\n": 3}
    text = "".join(figures.waits_text(waits))
    assert '{\n  "p": {\n    ' + text + "\n  }\n}" == json.dumps({"p": {"waits": waits}}, indent=2)


def test_the_replay_keeps_no_object_a_request() -> None:
    size = 4_000
    drawn = generate_columns(SCALE, size, 0)
    replay_columns(drawn, "continuous")  # numpy's import and first call are not the replay's
    tracemalloc.start()
    try:
        for policy in POLICIES:
            replay_columns(drawn, policy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BYTES_A_REQUEST * size, f"{peak / size:.0f} bytes a request"
    # The measure can fail: the Request objects of the same workload take far more.
    tracemalloc.start()
    try:
        generate(SCALE, size, 0)
        _, objects = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert objects > BYTES_A_REQUEST * size


def test_the_command_reads_a_family_as_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvsched import cli
    from kvsched.commands import replay as command

    def no_requests(*args: object) -> None:
        raise AssertionError("the fast path made Request objects")

    monkeypatch.setattr(command, "workload_from_spec", no_requests)
    assert cli.main(["replay", "family:scale:300", "--timeline", "none"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scale-n300-s0: 300 requests")
    assert cli.main(["replay", "family:scale:300", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["continuous"]["waits"]["r299"] >= 0
