"""The lists of ids a version-2 line keeps as raw JSON (its queue and its decode list, each read
as a change to the last line's), the queue split off a compact line before it is decoded, and
the check for repeated keys that spares the reader re-encoding every line."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kvsched.checks.eventlog.ids import (
    _LAID_OUT,
    DecodeList,
    QueueReader,
    _cut,
    _laid_out,
    appended,
    split_queue,
)
from kvsched.checks.eventlog.jsonl import EventLogError
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.version2 import DECODER, IterationLine
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.reference import POLICIES
from kvsched.reference.engine import run
from kvsched.spec.properties import TargetProperties
from kvsched.spec.workload import Limits, Request, Workload

# Ids that JSON escapes, that hold the bytes the reader cuts at, or that are not ASCII.
TRICKY = ["r0", "r1", 'q"', "a,b", "c\\", '",', "ü", "x:y", "\n", "r10", "r100", "]"]


def written(ids: list[str], spaced: bool) -> msgspec.Raw:
    if spaced:
        return msgspec.Raw(json.dumps(ids, ensure_ascii=True).encode())
    return msgspec.Raw(msgspec.json.encode(ids))


queues = st.lists(
    st.tuples(st.lists(st.sampled_from([*TRICKY, "stranger"]), max_size=12), st.booleans()),
    max_size=12,
)


@given(queues)
def test_the_queue_read_as_a_change_is_the_queue_decoded_whole(steps: list) -> None:
    reader = QueueReader(TRICKY)
    for ids, spaced in steps:
        assert reader.read(written(ids, spaced), "line") == tuple(ids)
        assert reader.known == all(rid in TRICKY for rid in ids)


@given(
    st.lists(st.sampled_from(TRICKY), min_size=1, max_size=10),
    st.integers(0, 10),
    st.lists(st.sampled_from(TRICKY), max_size=4),
)
def test_heads_admitted_and_arrivals_behind_are_read_from_the_new_bytes(
    queue: list[str], admitted: int, arrived: list[str]
) -> None:
    reader = QueueReader(TRICKY)
    reader.read(written(queue, False), "line")
    after = [*queue[admitted:], *arrived]
    assert reader.read(written(after, False), "line") == tuple(after)


def test_a_tail_written_with_spaces_does_not_mislead_the_next_cut() -> None:
    # Were the spaced tail taken as canonical, the cut for two heads would land on "a".
    reader = QueueReader(["x", "a", "b"])
    for raw, ids in [
        (b'["x"]', ("x",)),
        (b'["x",    "a","b"]', ("x", "a", "b")),
        (b'["a","b"]', ("a", "b")),
    ]:
        assert reader.read(msgspec.Raw(raw), "line") == ids


def test_a_malformed_queue_is_invalid_input_naming_the_entry() -> None:
    reader = QueueReader(["a"])
    reader.read(written(["a"], False), "log: line 2")
    with pytest.raises(EventLogError, match=r"log: line 3: field 'waiting\[1\]': expected 'str'"):
        reader.read(msgspec.Raw(b'["a",7]'), "log: line 3")


def clean_log(tmp_path: Path) -> tuple[Path, list[dict]]:
    requests = tuple(Request(f"r{i}", i, 3, 4) for i in range(6))
    result = run(Workload("ids", Limits(2, 2, 12), requests), POLICIES["continuous"])
    lines = [json.loads(line) for line in v2_lines(result, TargetProperties("continuous"))]
    return tmp_path / "log.jsonl", lines


def write(path: Path, lines: list[dict], raw: dict[int, str] | None = None) -> Path:
    text = [json.dumps(line, separators=(",", ":")) for line in lines]
    for index, line in (raw or {}).items():
        text[index] = line
    path.write_text("\n".join(text) + "\n")
    return path


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "full path"])
def test_a_malformed_decode_list_is_invalid_input_naming_the_entry(
    fast: bool, tmp_path: Path
) -> None:
    path, lines = clean_log(tmp_path)
    index = next(
        i for i, line in enumerate(lines) if any(op[0] == "decode" for op in line.get("ops", ()))
    )
    op = next(k for k, op in enumerate(lines[index]["ops"]) if op[0] == "decode")
    lines[index]["ops"][op][1].append(3)
    with pytest.raises(EventLogError, match=rf"line {index + 1}: field 'ops\[{op}\]\[1\]\[\d+\]'"):
        check_stream(write(path, lines), fast=fast)


@pytest.mark.parametrize(
    "repeat",
    [
        '"free_pages":0,',  # a second free_pages, before the first
        '"free_pages" :0,',  # with a space before its colon
        '"waiting":["x:y"],"waiting":[],',  # a colon inside a string, and a repeated queue
    ],
)
def test_a_repeated_key_is_invalid_input(repeat: str, tmp_path: Path) -> None:
    path, lines = clean_log(tmp_path)
    index = 3
    text = json.dumps(lines[index], separators=(",", ":")).replace('"ops"', repeat + '"ops"', 1)
    with pytest.raises(EventLogError, match=f"line {index + 1}"):
        check_stream(write(path, lines, {index: text}))


def test_colons_and_spaces_in_a_clean_log_are_not_repeated_keys(tmp_path: Path) -> None:
    path, lines = clean_log(tmp_path)
    spaced = [json.dumps(line, separators=(", ", " : ")) for line in lines]
    path.write_text("\n".join(spaced) + "\n")
    assert check_stream(path).finding is None


JUNK = st.text(alphabet='[]",a\\ :x', max_size=6)


@given(queues, st.lists(st.tuples(st.integers(0, 40), JUNK), max_size=6))
def test_accept_reads_any_bytes_as_a_decoder_would(steps: list, damage: list) -> None:
    # The split road hands accept a queue's bytes that no decoder has checked.
    reader = QueueReader(TRICKY)
    padded = [*damage, *([(0, "")] * len(steps))][: len(steps)]
    for (ids, spaced), (at, junk) in zip(steps, padded, strict=True):
        raw = bytes(written(ids, spaced))
        broken = raw[:at] + junk.encode() + raw[at + len(junk) :] if junk else raw
        try:
            expected = json.loads(broken)
        except ValueError:
            expected = None
        is_ids = isinstance(expected, list) and all(isinstance(x, str) for x in expected)
        assert reader.accept(broken) == (tuple(expected) if is_ids else None), broken
        assert reader.accept(raw) == tuple(ids)  # a refused queue leaves the reader as it was


def _line(**fields: object) -> bytes:
    return json.dumps({"type": "iteration", **fields}, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "line, split",
    [
        (_line(iteration=1, ops=[], free_pages=3, waiting=["a"]), b'["a"]'),
        # a table keyed "waiting" is not the queue
        (_line(iteration=1, ops=[], free_pages=3, tables={"waiting": [1]}), None),
        (
            _line(iteration=1, ops=[], free_pages=3, tables={"waiting": [1]}, waiting=["a"]),
            b'["a"]',
        ),
        # the queue not last: the head is no whole line
        (_line(iteration=1, free_pages=3, waiting=["a"], ops=[["decode", ["a"]]]), None),
        # a repeated queue: the head holds one of its own
        (_line(iteration=1, ops=[], free_pages=3, waiting=["a"])[:-1] + b',"waiting":["b"]}', None),
        # a colon in an id of the head: counted the usual way
        (_line(iteration=1, ops=[["finish", "x:y"]], free_pages=3, waiting=["a"]), None),
    ],
)
def test_the_queue_is_split_off_only_where_it_is_the_last_key(
    line: bytes, split: bytes | None
) -> None:
    found = split_queue(line)
    assert (found and found[1]) == split
    if found is not None:
        whole = DECODER.decode(line)
        assert isinstance(whole, IterationLine)
        assert bytes(whole.waiting) == found[1]
        whole.waiting = found[0].waiting
        assert found[0] == whole


def test_a_queue_repeated_last_is_invalid_input(tmp_path: Path) -> None:
    path, lines = clean_log(tmp_path)
    text = json.dumps(lines[3], separators=(",", ":"))[:-1] + ',"waiting":["r5"]}'
    with pytest.raises(EventLogError, match="line 4"):
        check_stream(write(path, lines, {3: text}))


def test_a_head_that_finished_since_is_cut_by_decoding_the_queue_whole() -> None:
    # An abort from the queue forgets a request the last queue still listed.
    reader = QueueReader(["a", "b", "c"])
    reader.read(written(["a", "b"], False), "line")
    reader.forget("a")
    assert reader.read(written(["b", "c"], False), "line") == ("b", "c")


@st.composite
def decode_changes(draw: st.DrawFn) -> list[tuple[list[str], bool, set[str] | None, set[str]]]:
    """Decode lists in turn, each the last less some ids, more some at its end, and now and then
    an id substituted or two swapped; with the guess of who left (right, wrong or ``None``) and
    the batch a reader is given for it."""
    steps = []
    last: list[str] = []
    for _ in range(draw(st.integers(1, 10))):
        gone = draw(st.sets(st.integers(0, max(len(last) - 1, 0))))
        ids = [rid for i, rid in enumerate(last) if i not in gone]
        ids += draw(st.lists(st.sampled_from(TRICKY), max_size=3))
        change = draw(st.integers(0, 3))
        if ids and change == 1:  # an id in another's place
            ids[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(TRICKY))
        elif len(ids) > 1 and change == 2:  # two ids swapped
            i, j = draw(st.lists(st.integers(0, len(ids) - 1), min_size=2, max_size=2))
            ids[i], ids[j] = ids[j], ids[i]
        left = draw(
            st.one_of(
                st.just({rid for i, rid in enumerate(last) if i in gone}),
                st.sets(st.sampled_from(TRICKY), max_size=3),
                st.none(),
            )
        )
        batch = draw(st.one_of(st.just(set(ids)), st.sets(st.sampled_from(TRICKY))))
        steps.append((ids, draw(st.booleans()), left, batch))
        last = ids
    return steps


@given(decode_changes())
def test_the_decode_list_read_as_a_change_is_the_list_decoded_whole(steps: list) -> None:
    reader = DecodeList()
    for ids, spaced, left, batch in steps:
        guess = None if left is None else dict.fromkeys(left)
        assert reader.read(written(ids, spaced), guess, dict.fromkeys(batch))
        assert reader.ids == tuple(ids)
        assert reader.members == set(ids)
        assert reader.written in (None, msgspec.json.encode(ids))


@given(st.lists(st.sampled_from(TRICKY), min_size=2, unique=True), st.data())
def test_ids_cut_out_of_a_list_leave_the_rest_as_msgspec_writes_it(
    ids: list[str], data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(ids) - 1), min_size=1, max_size=len(ids) - 1))
    cuts = sorted(set(cuts))
    kept = [rid for at, rid in enumerate(ids) if at not in cuts]
    cut = _cut(msgspec.json.encode(ids), tuple(ids), cuts)
    if all(rid.isascii() and json.dumps(rid) == f'"{rid}"' for rid in ids):
        assert cut == msgspec.json.encode(kept)
    else:
        assert cut is None  # then encoded anew


@given(st.tuples(st.integers(0, 80), st.binary(max_size=6), st.integers(0, 6)))
@example((40, b":", 0))  # a colon among the operations
@example((33, b'1,"ops":[],"ops":', 0))  # a repeated key
def test_a_head_laid_out_as_written_has_only_its_keys_colons(damage: tuple) -> None:
    head = b'{"type":"iteration","iteration":12,"ops":[["token","r1"]],"free_pages":3}'
    at, junk, cut = damage
    broken = head[:at] + junk + head[at + cut :]
    assert not _laid_out(broken) or broken.count(b":") == _LAID_OUT


def test_a_decode_list_that_is_no_list_of_ids_leaves_the_reader_as_it_was() -> None:
    reader = DecodeList()
    assert reader.read(written(["a", "b"], False), None, {})
    assert not reader.read(msgspec.Raw(b'["a","b",3]'), {}, {"a": None, "b": None})
    assert reader.ids == ("a", "b")
    assert reader.members == {"a", "b"}


@given(
    st.lists(st.sampled_from(TRICKY), max_size=6),
    st.lists(st.sampled_from(TRICKY), max_size=3),
    st.tuples(st.integers(0, 40), JUNK),
)
@example(["a"], [], (4, ",]"))  # a comma and no id after it
@example([], ["a"], (1, ',"a"]'))  # a comma and no id before it
def test_appended_reads_any_bytes_as_a_decoder_would(
    head: list[str], tail: list[str], damage: tuple[int, str]
) -> None:
    raw = msgspec.json.encode([*head, *tail])
    at, junk = damage
    broken = raw[:at] + junk.encode() + raw[at + len(junk) :]
    read = appended(broken, msgspec.json.encode(head))
    if read is not None:
        assert json.loads(broken) == [*head, *read], broken
    elif broken == raw:
        assert not head and tail  # a canonical list is read unless it has no head
