"""Interrupts always win: SIGINT and SIGTERM end every command within about a second, at every
phase, as 130 or 143 with one line on stderr and no traceback.

Each test runs kvsched as a person or a CI runner does (``python -m kvsched`` in a subprocess),
waits for the phase it means (a target that marks in a file where the check has got to, or a
command known to spend its time there), and sends the signal. A layer that swallows the
KeyboardInterrupt (Z3's own Ctrl-C handler did: ``unknown``, then "not proved" or a pass), or a C
call that does not return to Python, must neither turn the signal into a verdict nor keep
kvsched running; whatever the command then returns, the signal decides the exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import SLOW, wait_for

from kvsched.cli import GRACE_SECONDS
from kvsched.spec.vocabulary import ExitCode

SOON = GRACE_SECONDS + 1.5
"""Signal to exit: the grace the unwinding gets, then slack for a busy 2-core machine."""
STARTING = 60.0
"""How long a phase may take to be reached on a busy machine."""

CODES = {signal.SIGINT: ExitCode.INTERRUPTED, signal.SIGTERM: ExitCode.TERMINATED}
LINES = {
    signal.SIGINT: "interrupted (SIGINT, Ctrl-C); no verdict",
    signal.SIGTERM: "terminated (SIGTERM); no verdict",
}
BOTH = pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])

SEARCHED = """
import time
from kvsched.reference import ContinuousScheduler

MARK = {mark!r}
built = 0


class Searched(ContinuousScheduler):
    '''Correct and slow; marks the 10th construction: the monitor's fixed workloads build 3,
    so Hypothesis's examples are under way.'''

    def __init__(self, limits):
        global built
        super().__init__(limits)
        built += 1
        if built == 10:
            open(MARK, "w").close()

    def schedule(self):
        time.sleep(0.005)
        return super().schedule()
"""

SHRUNK = """
import time
from dataclasses import replace
from kvsched.reference import ContinuousScheduler

MARK = {mark!r}
built = 0


class Shrunk(ContinuousScheduler):
    '''From its 10th construction (Hypothesis's examples), reports each finished request
    finished again (REQ-2) and marks it: what follows is shrinking, slowed down.'''

    def __init__(self, limits):
        global built
        super().__init__(limits)
        built += 1
        self._last = ()

    def schedule(self):
        if built >= 10:
            time.sleep(0.02)
        return super().schedule()

    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        if built < 10:
            return outcome
        again, self._last = self._last, outcome.finished
        if again:
            open(MARK, "w").close()
        return replace(outcome, finished=outcome.finished + again)
"""


def interrupt(
    arguments: list[str],
    cwd: Path,
    sent: signal.Signals,
    ready: Callable[[], object],
    group: bool = False,
) -> tuple[int, str, str, float]:
    """Run ``kvsched ARGUMENTS``, send ``sent`` once ``ready()`` (to its whole process group if
    ``group``, as a terminal's Ctrl-C is); its code, outputs and the seconds from the signal to
    its exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kvsched", *arguments],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,
    )
    try:
        reached = wait_for(lambda: ready() or process.poll() is not None, STARTING)
        assert reached and process.poll() is None, ("the phase was not reached", process.poll())
        if group:
            os.killpg(process.pid, sent)
        else:
            process.send_signal(sent)
        sent_at = time.monotonic()
        process.wait(timeout=60)
        seconds = time.monotonic() - sent_at
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, out, err, seconds


def assert_stopped(
    outcome: tuple[int, str, str, float], sent: signal.Signals, command: str, quiet: bool = True
) -> None:
    """The signal's code, within :data:`SOON`, its line last on stderr (the only one if the
    command writes nothing else there), and no traceback."""
    code, out, err, seconds = outcome
    assert code == CODES[sent], outcome
    assert seconds < SOON, outcome
    assert "Traceback" not in out + err, outcome
    assert err.endswith(f"kvsched {command}: {LINES[sent]}\n"), outcome
    assert err.count(LINES[sent]) == 1, outcome
    if quiet:
        assert err.count("\n") == 1, outcome


@BOTH
def test_a_signal_ends_a_check_while_hypothesis_searches(
    tmp_path: Path, sent: signal.Signals
) -> None:
    mark = tmp_path / "searching"
    (tmp_path / "searched.py").write_text(SEARCHED.format(mark=str(mark)), encoding="utf-8")
    check = ["check", "searched.py:Searched", "--sandbox", "none", "--z3-requests", "0"]
    assert_stopped(interrupt(check, tmp_path, sent, mark.exists), sent, "check")


@BOTH
def test_a_signal_ends_a_check_while_it_shrinks(tmp_path: Path, sent: signal.Signals) -> None:
    mark = tmp_path / "shrinking"
    (tmp_path / "shrunk.py").write_text(SHRUNK.format(mark=str(mark)), encoding="utf-8")
    check = ["check", "shrunk.py:Shrunk", "--sandbox", "none", "--z3-requests", "0"]
    assert_stopped(interrupt(check, tmp_path, sent, mark.exists), sent, "check")


def _after(seconds: float) -> Callable[[], bool]:
    ends = time.monotonic() + seconds
    return lambda: time.monotonic() >= ends


@BOTH
def test_a_signal_ends_a_check_while_z3_proves(tmp_path: Path, sent: signal.Signals) -> None:
    """The reference's verdict cites Z3 proofs: past the monitor's second, Z3 solves for
    several seconds. SIGINT used to be Z3's, and the check went on to PASS with exit 0."""
    check = ["check", "kvsched.reference:ContinuousScheduler", "--no-hypothesis"]
    outcome = interrupt([*check, "--z3-requests", "20"], tmp_path, sent, _after(4.0))
    assert_stopped(outcome, sent, "check")


@BOTH
def test_a_signal_ends_prove_inside_a_z3_check(tmp_path: Path, sent: signal.Signals) -> None:
    """Z3's C solver does not return to Python until done; the watchdog interrupts it."""
    prove = ["prove", "--requests", "30", "--policy", "continuous"]
    assert_stopped(interrupt(prove, tmp_path, sent, _after(4.0)), sent, "prove")


@BOTH
def test_a_signal_ends_mutants(tmp_path: Path, sent: signal.Signals) -> None:
    assert_stopped(interrupt(["mutants"], tmp_path, sent, _after(3.0)), sent, "mutants")


@BOTH
def test_a_signal_ends_a_report_while_its_target_runs(tmp_path: Path, sent: signal.Signals) -> None:
    (tmp_path / "slow.py").write_text(SLOW, encoding="utf-8")
    report = ["report", "--policies", "slow=slow.py:Slow", "--timeout", "300", "--no-plots"]
    outcome = interrupt(report, tmp_path, sent, _after(3.0))
    assert_stopped(outcome, sent, "report")


GRID = """\
configs = ["vllm-v1"]
seeds = [0, 1]

[[families]]
name = "bursty-short-tight"
size = 24

[[targets]]
name = "slow"
target = "slow.py:Slow"
"""


@pytest.mark.parametrize(
    ("jobs", "group"), [("1", False), ("2", False), ("2", True)], ids=["1", "2", "2-group"]
)
@BOTH
def test_a_signal_ends_a_sweep_and_its_workers(
    tmp_path: Path, sent: signal.Signals, jobs: str, group: bool
) -> None:
    """The pool's workers, each running a hosted target that sleeps in its call, are killed, not
    awaited (which took the cell's whole budget), and none outlives kvsched; a terminal's
    Ctrl-C, which reaches the workers too, ends it the same way."""
    (tmp_path / "slow.py").write_text(SLOW, encoding="utf-8")
    (tmp_path / "grid.toml").write_text(GRID, encoding="utf-8")
    sweep = ["sweep", "grid.toml", "--out", "out", "--jobs", jobs]
    outcome = interrupt(sweep, tmp_path, sent, _after(5.0), group)
    assert_stopped(outcome, sent, "sweep", quiet=False)
    assert wait_for(lambda: not _workers_in(tmp_path), 5.0), _workers_in(tmp_path)


def _workers_in(folder: Path) -> list[int]:
    """Live processes started in ``folder`` (the workers, the hosts), by their working folder."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "cwd").resolve() != folder.resolve():
                continue
            if (entry / "stat").read_text().rpartition(")")[2].split()[0] != "Z":  # not a zombie
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to look at
            continue
    return found


SWALLOWING = textwrap.dedent(
    """
    import sys
    import time
    from kvsched import cli

    class Parser:
        '''A command that swallows every KeyboardInterrupt{finally_}.'''

        def parse_args(self, argv):
            return self

        command = "check"

        @staticmethod
        def func(args):
            returns = time.monotonic() + {seconds}
            told = False
            while True:
                try:  # from before "ready": the signal never gets through
                    if not told:
                        told = True
                        print("ready", flush=True)
                    while time.monotonic() < returns:
                        time.sleep(0.01)
                    {ending}
                except KeyboardInterrupt:
                    pass

    cli.build_parser = Parser
    sys.exit(cli.main())
    """
)


FINALIZED = textwrap.dedent(
    """
    import sys
    import time
    from kvsched import cli

    class Garbage:
        '''Its finalizer runs when the signal comes, as the finalizers of Z3 objects do
        between two checks: what a finalizer raises is printed ("Exception ignored in") and
        dropped.'''

        def __del__(self):
            print("ready", flush=True)
            ends = time.monotonic() + 1.0
            while time.monotonic() < ends:
                pass

    class Parser:
        def parse_args(self, argv):
            return self

        command = "check"

        @staticmethod
        def func(args):
            Garbage()
            ends = time.monotonic() + {seconds}
            while time.monotonic() < ends:
                time.sleep(0.01)
            {ending}

    cli.build_parser = Parser
    sys.exit(cli.main())
    """
)


@pytest.mark.parametrize(
    ("source", "seconds", "how"),
    [
        (SWALLOWING, 0.3, ", then passes"),
        (SWALLOWING, 0.3, ", then fails"),
        (SWALLOWING, 300, " and never returns"),
        (FINALIZED, 0.3, ""),
        (FINALIZED, 300, ""),
    ],
    ids=["returns-0", "raises", "hangs", "in-a-finalizer-returns-0", "in-a-finalizer-goes-on"],
)
@BOTH
def test_a_command_that_swallows_the_signal_still_ends_with_it(
    tmp_path: Path, sent: signal.Signals, source: str, seconds: float, how: str
) -> None:
    """The rule is structural, not a search for every ``except BaseException``: a command that
    catches the KeyboardInterrupt and returns 0 exits with the signal's code, and one that goes
    on is ended by the watchdog. What fails after the signal fails because of it (Z3,
    interrupted between two checks, answers the next push with "push canceled"): no trace."""
    ending = "raise RuntimeError('push canceled')" if how.endswith("fails") else "return 0"
    source = source.format(seconds=seconds, finally_=how, ending=ending)
    process = subprocess.Popen(
        [sys.executable, "-c", source],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(sent)
        sent_at = time.monotonic()
        process.wait(timeout=60)
        seconds = time.monotonic() - sent_at
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert_stopped((process.returncode, out, err, seconds), sent, "check")
