"""Event logs that come down a pipe: ``kvsched check -`` reads an engine's output on standard
input, and a named pipe or a shell's ``<(...)`` is read the same way, plain or gzip, as it
comes. The verdict is the file's, and a violation is reported without waiting for the end."""

from __future__ import annotations

import gzip
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kvsched.checks.eventlog.lines import EventLogError
from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.eventlog.source import numbered_lines
from kvsched.checks.targets.load import EventLogTarget, TargetError, is_event_log, load_target

LOGS = Path(__file__).resolve().parents[1] / "logs"
CLEAN = LOGS / "vllm_like.clean.jsonl"
BROKEN = LOGS / "vllm_like.ghost_revival.jsonl"  # PAGE-2


def _check_stdin(data: bytes, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvsched", "check", "-", *argv],
        input=data.decode("latin-1"),
        encoding="latin-1",
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_a_log_on_standard_input_gets_the_files_verdict(packed: bool) -> None:
    for log, code in ((CLEAN, 0), (BROKEN, 1)):
        data = log.read_bytes()
        result = _check_stdin(gzip.compress(data) if packed else data)
        assert result.returncode == code, result.stderr
        if code:
            assert "PAGE-2" in result.stdout


def test_a_violation_is_reported_before_the_pipe_closes() -> None:
    # An engine that pipes its log learns of the first violation while it still runs.
    with subprocess.Popen(
        [sys.executable, "-m", "kvsched", "check", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as checker:
        assert checker.stdin is not None
        checker.stdin.write(BROKEN.read_bytes())
        checker.stdin.flush()  # and left open, as a running engine leaves it
        try:
            code = checker.wait(timeout=120)
        finally:
            checker.stdin.close()
        assert code == 1
        assert checker.stdout is not None
        assert b"PAGE-2" in checker.stdout.read()


@pytest.mark.parametrize("log", [CLEAN, BROKEN], ids=["clean", "broken"])
@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_a_named_pipe_written_in_small_pieces_reads_like_the_file(
    log: Path, packed: bool, tmp_path: Path
) -> None:
    data = gzip.compress(log.read_bytes()) if packed else log.read_bytes()
    fifo = tmp_path / "run.pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb", buffering=0) as pipe:
            for at in range(0, len(data), 7):  # lines, and gzip's header, split across reads
                pipe.write(data[at : at + 7])

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    piped = check_stream(fifo, all_findings=True)
    writer.join(timeout=60)
    read = check_stream(log, all_findings=True)
    assert (piped.iterations, piped.finding, piped.later) == (
        read.iterations,
        read.finding,
        read.later,
    )
    assert piped.efficiency == read.efficiency


def test_a_broken_gzip_stream_on_standard_input_is_invalid_input() -> None:
    result = _check_stdin(gzip.compress(CLEAN.read_bytes())[:-12])
    assert result.returncode == 2
    assert "/dev/stdin: line" in result.stderr
    assert "a broken or truncated gzip stream" in result.stderr


def test_a_terminal_on_standard_input_is_refused_not_waited_on() -> None:
    primary, secondary = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kvsched", "check", "-"],
            stdin=secondary,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert result.returncode == 2
    assert "standard input is a terminal" in result.stderr


def test_pipes_are_event_logs_and_other_files_are_not(tmp_path: Path) -> None:
    fifo = tmp_path / "run"
    os.mkfifo(fifo)
    assert is_event_log("-")
    assert is_event_log(str(fifo))
    assert load_target(str(fifo)) == EventLogTarget(str(fifo), fifo)
    plain = tmp_path / "run.txt"
    plain.write_text("{}")
    assert not is_event_log(str(plain))
    assert not is_event_log(str(tmp_path))
    assert not is_event_log("kvsched.reference:ContinuousScheduler")
    with pytest.raises(TargetError, match="no such file"):
        load_target(str(tmp_path / "gone.jsonl"))


@pytest.mark.parametrize("at", [0.3, 0.5, 0.7])
def test_a_garbled_gzip_log_is_invalid_input_not_a_crash(tmp_path: Path, at: float) -> None:
    # Whichever inflater reads it (python-isal's or zlib's), its errors are the log's fault.
    packed = bytearray(gzip.compress(CLEAN.read_bytes()))
    middle = int(len(packed) * at)
    packed[middle : middle + 48] = bytes(range(200, 248))
    path = tmp_path / "garbled.jsonl.gz"
    path.write_bytes(bytes(packed))
    with pytest.raises(EventLogError, match=r"garbled\.jsonl\.gz: line \d+"):
        check_stream(path)


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_lines_lose_every_line_end_character_at_their_end(tmp_path: Path, packed: bool) -> None:
    data = b"a\nb\r\nc\r\r\n\n\r\nd\re\n:\r"
    log = tmp_path / "ends.jsonl"
    log.write_bytes(gzip.compress(data) if packed else data)
    lines = [b"a", b"b", b"c", b"", b"", b"d\re", b":"]
    assert list(numbered_lines(log)) == list(enumerate(lines, start=1))
