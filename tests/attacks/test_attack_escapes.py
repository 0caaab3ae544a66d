"""The target's text is data: it cannot drive a terminal, spoof the verdict or break a report.

A request id in an event log, a learner file's name, an exception's text: each is the target's
to write, and each reaches kvsched's outputs. Written as it came, ``ESC [2J ESC [H PASS`` clears
a grader's screen and prints ``PASS`` over a failing verdict, a carriage return or a bidi
override rewrites the line it sits in, and U+FFFE makes the JUnit file something no XML parser
reads. Every output shows such characters as visible escapes (``\\x1b``, ``\\ufffe``), the
verdict's first line starts with kvsched's own PASS or FAIL, and a text longer than kvsched shows
is cut, saying by how much.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.dom.minidom
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from attack_harness import SLACK_SECONDS, check_in_process, failed, write_attack
from hypothesis import example, given
from hypothesis import strategies as st
from rich.console import Console
from rich.progress import Progress, TextColumn

from kvsched.checks.targets.wire import TEXT_LIMIT
from kvsched.checks.verdict.render import LINE_LIMIT
from kvsched.commands.terminal import _Drawn
from kvsched.reports.render import Paragraph, to_html, to_markdown
from kvsched.spec.text import escaped, one_line

LOGS = Path(__file__).parents[1] / "logs"

SPOOF = "\x1b[2J\x1b[H\rPASS  every invariant holds"
"""Clears the screen, homes the cursor, and prints a pass where the verdict was."""
HOSTILE = SPOOF + "\u202e\u2066\x9b\x07\ufffe\uffff\u2028"
"""And the rest of what no output may carry: a bidi override and isolate, C1's CSI, BEL, the
noncharacters XML 1.0 forbids, a line separator."""
RAW = ("\x1b", "\r", "\u202e", "\u2066", "\x9b", "\x07", "\ufffe", "\uffff", "\u2028")


def _clean(text: str) -> None:
    """``text`` carries none of the raw characters, and shows the escape sequence as text."""
    for char in RAW:
        assert char not in text, (char, text)


def _hostile_log(folder: Path, name: str = "hostile.jsonl") -> Path:
    """A log with a real violation (PAGE-4: a finished request's pages never freed), its request
    id ``b`` renamed to one carrying :data:`HOSTILE`. The format takes any string as an id."""
    text = (LOGS / "vllm_like.leak_on_finish.jsonl").read_text(encoding="utf-8")
    path = folder / name
    path.write_text(text.replace('"b"', json.dumps("b" + HOSTILE)), encoding="utf-8")
    return path


def _well_formed(path: Path) -> str:
    """The file parses as XML 1.0; its text."""
    xml.dom.minidom.parse(str(path))  # raises ExpatError on what XML 1.0 forbids
    return path.read_text(encoding="utf-8")


def test_a_logs_request_id_cannot_spoof_the_verdict(tmp_path: Path, capsys: object) -> None:
    log = _hostile_log(tmp_path)
    junit = tmp_path / "verdict.xml"
    outcome = check_in_process(capsys, str(log), "--junit-xml", str(junit))
    failed(outcome, "PAGE-4")
    _clean(outcome.out)
    assert outcome.out.splitlines()[0].startswith("FAIL  "), outcome.out
    assert "b\\x1b[2J\\x1b[H\\x0dPASS" in outcome.out  # shown, as text
    assert "\\u202e" in outcome.out and "\\ufffe" in outcome.out
    _clean(_well_formed(junit))


def test_a_logs_request_id_is_data_in_json(tmp_path: Path, capsys: object) -> None:
    outcome = check_in_process(capsys, str(_hostile_log(tmp_path)), "--json")
    assert outcome.code == 1, outcome
    _clean(outcome.out)  # ASCII only: no byte of it drives a terminal
    report = json.loads(outcome.out)
    [verdict] = report["verdicts"]
    # Prose is escaped; the counterexample keeps the id itself, to be replayed as it was.
    _clean(verdict["finding"]["message"])
    _clean("\n".join(verdict["finding"]["recent"]))
    ids = [r["id"] for r in verdict["counterexample"]["workload"]["requests"]]
    assert "b" + HOSTILE in ids


def test_a_logs_fault_message_is_escaped_and_cut(tmp_path: Path, capsys: object) -> None:
    """A log's fault line quotes the engine's error as the log's writer made it: any text, any
    length. It reaches the finding's message, hence every output, without the wire's cut."""
    lines = (LOGS / "nano_like.clean.jsonl").read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])["iteration"]
    length = 4 * LINE_LIMIT
    message = f"boom {HOSTILE}" + "y" * length
    fault = {"type": "fault", "iteration": last + 1, "call": "schedule", "message": message}
    log = tmp_path / "fault.jsonl"
    log.write_text("\n".join([*lines, json.dumps(fault)]) + "\n", encoding="utf-8")
    junit = tmp_path / "verdict.xml"
    outcome = check_in_process(capsys, str(log), "--junit-xml", str(junit))
    failed(outcome, "PROTO-1", "schedule() failed: boom \\x1b[2J")
    _clean(outcome.out)
    assert outcome.out.startswith("FAIL  "), outcome.out
    longest = max(len(run) for run in re.findall("y+", outcome.out))
    assert longest <= LINE_LIMIT, longest
    assert re.search(r"y\.\.\. \(\d+ more characters\)", outcome.out), outcome.out
    shown = _well_formed(junit)
    _clean(shown)
    assert max(len(run) for run in re.findall("y+", shown)) <= LINE_LIMIT


def test_a_learner_files_name_cannot_spoof_the_verdict(tmp_path: Path, capsys: object) -> None:
    path = tmp_path / f"solution{SPOOF}\n.py"
    path.write_text(
        'def schedule_iteration(state, limits, policy):\n    raise ValueError("no")\n',
        encoding="utf-8",
    )
    outcome = check_in_process(capsys, str(path))
    failed(outcome, "PROTO-1")
    _clean(outcome.out)
    first = outcome.out.splitlines()[0]
    assert first.startswith("FAIL  "), outcome.out
    # The name stays on the first line, its newline shown: no line of the output is its own.
    assert "solution\\x1b[2J\\x1b[H\\x0dPASS  every invariant holds\\x0a.py" in first
    assert not any(line.startswith("PASS") for line in outcome.out.splitlines())


RAISES = """
class Raises(Buggy):
    def schedule(self):
        raise ValueError({text!r})
"""


def test_an_exceptions_text_keeps_junit_well_formed(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, RAISES.format(text=f"bad {HOSTILE} state"))
    junit = tmp_path / "verdict.xml"
    outcome = check_in_process(capsys, f"{path}:Raises", "--junit-xml", str(junit))
    failed(outcome, "PROTO-1")
    _clean(outcome.out)
    assert outcome.out.startswith("FAIL  "), outcome.out
    shown = _well_formed(junit)
    _clean(shown)
    assert "\\ufffe\\uffff" in shown  # said, as text
    as_json = check_in_process(capsys, f"{path}:Raises", "--json")
    _clean(as_json.out)
    messages = [v["finding"]["message"] for v in json.loads(as_json.out)["verdicts"]]
    assert messages and all("bad \\x1b[2J" in m for m in messages), messages
    _clean("\n".join(messages))


UNCUT = """
import kvsched.checks.targets.wire as _wire

_wire.cut = lambda text: text  # the host runs this module: its cut is the target's to undo

class Floods(Buggy):
    def schedule(self):
        raise ValueError("x" * {length})
"""


def test_a_long_exception_text_is_cut_saying_how_much(tmp_path: Path, capsys: object) -> None:
    """The host cuts what it sends, but it runs the target's code: kvsched cuts again."""
    length = 20 * TEXT_LIMIT  # within what the wire takes for an exception's text
    path = write_attack(tmp_path, UNCUT.format(length=length))
    outcome = check_in_process(capsys, f"{path}:Floods")
    failed(outcome, "PROTO-1")
    longest = max(len(run) for run in re.findall("x+", outcome.out))
    assert longest <= TEXT_LIMIT, longest
    cut = re.search(r"x\.\.\. \((\d+) more characters\)", outcome.out)
    assert cut is not None, outcome.out
    assert int(cut.group(1)) >= length - TEXT_LIMIT


def test_a_phase_named_by_the_target_is_no_markup() -> None:
    """A workload's name (a log's to write) names the progress phase rich draws as markup."""
    shown = io.StringIO()
    bar = Progress(
        TextColumn("{task.description}"), console=Console(file=shown, force_terminal=True)
    )
    _Drawn(bar).phase(f"monitor on the recorded log ([/bold][blink]{SPOOF})", None)
    # rich reads the name as markup: [/bold] closes nothing, an error; [blink] blinks
    bar.console.print(bar.get_renderable())
    drawn = shown.getvalue()
    assert "[/bold][blink]" in drawn and "\\x1b[2J" in drawn, drawn
    assert "\x1b[5m" not in drawn and "\x1b[2J" not in drawn, drawn  # no blink, no clearing


def test_a_file_name_in_an_error_is_escaped(tmp_path: Path, capsys: object) -> None:
    """An input kvsched refuses is named in its one line on stderr."""
    log = tmp_path / f"log{SPOOF}.jsonl"
    log.write_text("not a log\n", encoding="utf-8")
    outcome = check_in_process(capsys, str(log))
    assert outcome.code == 2, outcome
    _clean(outcome.err)
    assert "log\\x1b[2J" in outcome.err, outcome.err


def test_pytest_shows_the_target_escaped(tmp_path: Path) -> None:
    """Test names and failure texts carry the target's file name and ids."""
    log = _hostile_log(tmp_path, f"log{SPOOF}.jsonl")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "KVSCHED_CACHE_DIR": str(tmp_path)}
    junit = tmp_path / "junit.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
         f"--junitxml={junit}", f"--kvsched-target={log}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=SLACK_SECONDS + 60, check=False,
        env=env,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PAGE-4 violated" in result.stdout, result.stdout
    _clean(result.stdout)
    assert "log\\x1b[2J" in result.stdout and "b\\x1b[2J" in result.stdout, result.stdout
    _clean(_well_formed(junit))


def test_reports_show_a_policys_text_escaped() -> None:
    """A report quotes a policy's failure, its own text, in report.md and report.html."""
    blocks = [Paragraph(f"the scheduler failed: {HOSTILE}")]
    for written in (to_markdown(blocks), to_html(blocks, "report")):
        _clean(written)
        assert "\\x1b[2J" in written


EDGES = (
    "\x00\x08\t\n\x0b\r\x1b\x1f \x7e\x7f\x9b\x9f\xa0\u061c\u200e\u200f\u2028\u2029"
    "\u202a\u202e\u2066\u2069\ud7ff\ud800\udbff\udc00\udfff\ue000\ufffd\ufffe\uffff\U00010000"
)
"""The edges of what XML 1.0 and a terminal forbid, and their neighbours, which a search over
all of Unicode would rarely try."""


# Joined from a list: as a text's alphabet, Hypothesis would merge the edges into the ranges of
# all characters and seldom draw one.
ANY_CHARACTER = st.sampled_from(EDGES) | st.characters(codec=None, exclude_categories=())


@example(EDGES)
@given(st.lists(ANY_CHARACTER).map("".join))
def test_any_escaped_text_is_well_formed_xml_and_inert(text: str) -> None:
    """Whatever the characters, lone surrogates included: the escaped text is XML 1.0 as text
    and as an attribute, holds no C0 but tab and newline, no DEL, C1 or bidi control, and
    escaping it again changes nothing (each output may escape what another escaped)."""
    shown = escaped(text)
    element = ElementTree.Element("failure", message=shown)
    element.text = shown
    document = ElementTree.tostring(element, encoding="unicode")
    parsed = xml.dom.minidom.parseString(document.encode("utf-8"))
    assert parsed.documentElement.getAttribute("message") == shown
    for char in shown:
        code = ord(char)
        assert char in "\t\n" or (0x20 <= code < 0x7F or code > 0x9F), repr(char)
        assert not 0x202A <= code <= 0x202E and not 0x2066 <= code <= 0x2069, repr(char)
        assert code not in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029), repr(char)  # marks, breaks
        assert not 0xD800 <= code <= 0xDFFF and code not in (0xFFFE, 0xFFFF), repr(char)
    assert escaped(shown) == shown
    assert "\n" not in one_line(text) and "\t" not in one_line(text)
