"""``kvsched replay`` prints the same figures from the fast path as from the stepped engine.

Without a timeline the command takes the event-jumping replay wherever its scope says it is exact;
``--engine stepped`` steps every iteration. Their outputs must be identical, character for
character, and the fast path must really be the one taken (else the comparison proves nothing).
Speed is not tested here: benchmarks/speed.py times the command on 10,000 requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsched import cli
from kvsched.commands import replay
from kvsched.reference.families import generate
from kvsched.spec.teaching import TEACHING_TRACE
from kvsched.spec.workload import workload_to_json

WITHOUT_TIMELINE = [["--format", "json"], ["--timeline", "none"]]


def workload_files(tmp_path: Path) -> list[Path]:
    files = [Path(TEACHING_TRACE)]
    for family in ("poisson-long-tight", "bursty-short-roomy", "bursty-heavy-tight"):
        path = tmp_path / f"{family}.json"
        path.write_text(json.dumps(workload_to_json(generate(family, 150, seed=3))))
        files.append(path)
    return files


def output(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["replay", *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("options", WITHOUT_TIMELINE, ids=" ".join)
def test_the_fast_path_prints_what_the_stepped_engine_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    for path in workload_files(tmp_path):
        stepped = output(capsys, str(path), *options, "--engine", "stepped")
        fast = output(capsys, str(path), *options)
        assert fast == stepped, path


def test_without_a_timeline_nothing_is_stepped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_stepping(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stepped engine ran where the fast path is exact")

    monkeypatch.setattr(replay, "run", no_stepping)
    for options in WITHOUT_TIMELINE:
        assert "continuous" in output(capsys, *options)


def test_the_timeline_steps(capsys: pytest.CaptureFixture[str]) -> None:
    text = output(capsys)
    assert "continuous batching, membership per iteration:" in text
    assert text == output(capsys, "--engine", "stepped")
