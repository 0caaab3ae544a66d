"""A differential oracle: one violation planted into a clean log is never a pass, and the
checker's fast and full paths agree on it.

The clean logs (tests/planted_sources.py) are version 1 and version 2 logs of the reference
policies, of the engine scheduler's designs (chunked prefill, prefix sharing, preemption) and the
recorded logs of tests/logs, vLLM's own among them; each passes, on both paths. Into a copy of one,
chosen at random, a planting (tests/planted.py, tests/planted_order.py) puts one violation of its
kind. The verdict must then be a finding whose invariant is one the kind may produce, in the
planted iteration unless the planting says why it shows later, or invalid input that names the
planted line; never "every invariant holds". The fast path (checks/eventlog/steady*.py) and the
full path must give the same check, or the same error, with and without all findings. Each
(kind, version) is a test; a miss known today is an xfail (strict) that says what is missed.
Under ``-m slow`` each runs ten times the cases, over twice the reference runs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import pytest
from planted import (
    Planted,
    alloc_held,
    free_count,
    over_cached,
    readmit,
    rearrive,
    repeated_in_batch,
    steal,
    unknown_id,
    wrong_hit,
)
from planted_ops import Rows, iterations
from planted_order import (
    drop_from_queue,
    free_twice,
    free_unheld,
    keep_pages,
    out_of_phase,
    reorder_queue,
    substitute_in_queue,
    swap_admissions,
)
from planted_sources import of_version
from planted_tokens import double_token, drop_token, long_chunk

from kvsched.checks.eventlog.jsonl import EventLogError
from kvsched.checks.eventlog.log_check import LogCheck, check_stream

SEED = 20261215


class Missed(AssertionError):
    """Planted logs that pass: what a known miss's xfail expects (and only that: a wrong id or
    iteration, or paths that disagree, fail the test even where it is marked)."""


@dataclass(frozen=True)
class Planting:
    kind: str
    name: str
    plant: Callable[[Rows, random.Random], Planted | None]
    ids: frozenset[str]
    """The invariants a finding on it may name; invalid input is always a fair verdict."""
    versions: tuple[int, ...] = (1, 2)
    missed: dict[int, str] = field(default_factory=dict)
    """Versions in which the checker misses it today, and what it misses (an xfail's reason)."""
    later: str = ""
    """Why any of its findings may come after the planted iteration (a planting may say so of
    one case); empty: in it."""


def _ids(*ids: str) -> frozenset[str]:
    return frozenset(ids)


# Two owners (PAGE-2); the page it replaced left the table unfreed (PAGE-3); a table longer than
# its KV needs (PAGE-1), where the other owner frees the page at the end of that iteration.
TAKEN = _ids("PAGE-2", "PAGE-3", "PAGE-1")
# A token fewer: the lesson model's one token per active request, or KV ahead of the output
# (DEC-1); a prefill that reads as a chunk short of the prompt's end (BATCH-5 when chunking is
# not declared, DEC-3); a request finished short of its output length (REQ-2).
TOKEN_FEWER = _ids("DEC-1", "DEC-3", "REQ-2", "BATCH-5")
# A queue's order is judged where it is reported (BATCH-4), its head by BATCH-3; a queue left
# short is judged by the admissions after it.
DROPPED_MISSED = (
    "a queue emptied by the request left out reads as a log that leaves the field out, which "
    "passes unless the next admissions go against the queue (a queue left with others in it is "
    "REQ-2 at once)"
)
QUEUE_LATER = "a queue is judged where admissions follow it: BATCH-4 at the next admissions (4.6)"
PLANTINGS = (
    Planting("tables", "grow", partial(steal, "grow"), TAKEN),
    Planting("tables", "last", partial(steal, "last"), TAKEN),
    Planting("tables", "middle", partial(steal, "middle"), TAKEN),
    Planting("tables", "alloc", alloc_held, _ids("PAGE-2", "PAGE-3")),
    # A page another request takes fresh later in the same schedule is that one's PAGE-2.
    Planting("hits", "wrong-page", wrong_hit, _ids("PAGE-6", "PAGE-2")),
    Planting("hits", "over-cached", over_cached, _ids("PAGE-6")),
    Planting("ids", "unknown", unknown_id, _ids("DEC-2", "REQ-1")),
    Planting("ids", "readmitted", readmit, _ids("REQ-2")),
    Planting("ids", "rearrived", rearrive, _ids("REQ-1")),
    Planting(
        "ids",
        "in-batch-twice",
        repeated_in_batch,
        _ids("REQ-2", "BATCH-1"),
        versions=(1,),
    ),
    Planting("counts", "off-by-one", free_count, _ids("PAGE-3")),
    Planting("tokens", "dropped", drop_token, TOKEN_FEWER),
    Planting("tokens", "doubled", double_token, _ids("DEC-1")),
    Planting("tokens", "long-chunk", long_chunk, _ids("DEC-1", "PAGE-1", "BATCH-1")),
    Planting("frees", "twice", free_twice, _ids("PAGE-3")),
    Planting("frees", "unheld", free_unheld, _ids("PAGE-3")),
    Planting("frees", "kept", keep_pages, _ids("PAGE-4", "PAGE-3")),  # or the count it left
    Planting("order", "swapped", swap_admissions, _ids("BATCH-4")),
    Planting("order", "phase", out_of_phase, _ids(), versions=(2,)),  # malformed: invalid only
    Planting(
        "queue",
        "reordered",
        reorder_queue,
        _ids("BATCH-4", "BATCH-3"),  # BATCH-3 where the head it reports fitted a free slot
    ),
    Planting(
        "queue",
        "dropped",
        drop_from_queue,
        _ids("REQ-2", "BATCH-4", "BATCH-3"),
        missed={1: DROPPED_MISSED, 2: DROPPED_MISSED},
        later=QUEUE_LATER,
    ),
    Planting("queue", "substituted", substitute_in_queue, _ids("REQ-2")),
)


def outcome(path: Path, fast: bool, every: bool) -> LogCheck | str:
    try:
        checked = check_stream(path, all_findings=every, fast=fast)
    except EventLogError as error:
        return f"invalid: {error}"
    return replace(checked, fast_lines=0) if fast else checked


def agreed(path: Path, context: str) -> list[LogCheck | str]:
    """The verdicts without and with all findings, once both paths agree on each."""
    verdicts = []
    for every in (False, True):
        full, fast = outcome(path, False, every), outcome(path, True, every)
        assert fast == full, f"{context}, all_findings={every}: the paths disagree"
        verdicts.append(full)
    return verdicts


def _cases(depth: str) -> tuple[int, int]:
    """Planted logs per test, and rounds of reference runs among the clean logs."""
    return (8, 3) if depth == "ci" else (80, 6)


DEPTHS = ("ci", pytest.param("deep", marks=pytest.mark.slow))


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_clean_logs_pass_on_both_paths(version: int, depth: str, tmp_path: Path) -> None:
    sources = of_version(version, _cases(depth)[1])
    text = "".join(line for source in sources for line in source.lines)
    features = ('"chunked_prefill":true', "preempt", "share", '"reserved_pages":[0]')
    assert all(f in text.replace(" ", "") for f in features)  # the engines' features are in
    for source in sources:
        path = tmp_path / "clean.jsonl"
        path.write_text("".join(line + "\n" for line in source.lines))
        for verdict in agreed(path, f"clean {source.name} v{version}"):
            assert isinstance(verdict, LogCheck), (source.name, verdict)
            assert verdict.finding is None, (source.name, str(verdict.finding))
            assert not verdict.later, source.name


def _params() -> list[object]:
    found = []
    for p in PLANTINGS:
        for version in p.versions:
            missed = p.missed.get(version)
            marks = [pytest.mark.xfail(raises=Missed, strict=True, reason=missed)] if missed else []
            found.append(pytest.param(p, version, id=f"v{version}-{p.kind}.{p.name}", marks=marks))
    return found


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("planting, version", _params())
def test_planted_violation_is_caught(
    planting: Planting, version: int, depth: str, tmp_path: Path
) -> None:
    cases, rounds = _cases(depth)
    seed = f"{SEED}:{planting.kind}.{planting.name}:v{version}:{depth}"
    rng = random.Random(seed)
    sources = of_version(version, rounds)
    done = tries = 0
    passed = []
    while done < cases:
        tries += 1
        assert tries < 50 * cases, f"{seed}: no site to plant in {done} cases"
        source = rng.choice(sources)
        rows = source.rows()
        planted = planting.plant(rows, rng)
        if planted is None:
            continue
        done += 1
        path = tmp_path / f"planted-{done}.jsonl"
        separators = (",", ":") if rng.random() < 0.8 else (", ", ": ")
        path.write_text("".join(json.dumps(row, separators=separators) + "\n" for row in rows))
        context = (
            f"seed {seed!r}, case {done}, {source.name} v{version}, iteration "
            f"{planted.iteration}: {planted.what} ({path})"
        )
        for verdict in agreed(path, context):
            if isinstance(verdict, LogCheck) and verdict.finding is None:
                passed.append(context)
            else:
                judged(verdict, planting, planted, _line_number(rows, planted.iteration), context)
    if passed:
        shown = "; ".join(dict.fromkeys(passed[:6]))
        raise Missed(f"{len(passed)} of {2 * cases} checks pass, every invariant holding: {shown}")


def judged(
    verdict: LogCheck | str, planting: Planting, planted: Planted, line: int, context: str
) -> None:
    """``verdict`` is a fair one on a log with ``planted`` in it, at the file's ``line``."""
    if isinstance(verdict, str):  # invalid input, naming the planted line
        assert f": line {line}:" in verdict or planted.later, f"{context}: {verdict}"
        return
    found = verdict.finding
    assert found is not None
    assert found.invariant in planting.ids, f"{context}: {found}"
    if planting.later or planted.later:  # after the planted line, or at the end (0)
        assert found.iteration >= planted.iteration or found.iteration == 0, f"{context}: {found}"
    else:
        assert found.iteration == planted.iteration, f"{context}: {found}"


def _line_number(rows: Rows, iteration: int) -> int:
    row = next(r for r in iterations(rows) if r["iteration"] == iteration)
    return next(i for i, r in enumerate(rows) if r is row) + 1
