"""The target's process cannot reach kvsched's: its imports, its signals, its outputs, its end.

Each attack runs under every containment this machine has (the test id names it: ``bwrap``,
``uid``, ``none``); those it lacks skip, saying why. What holds only inside a sandbox is tested
under ``CONTAINED`` alone, and what kvsched promises without one is tested under ``none``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attack_harness import (
    CONTAINED,
    FAST,
    SANDBOXES,
    check_in_process,
    check_program,
    failed,
    processes_with,
    write_attack,
)

from kvsched.checks.targets import sandbox as sandboxes

LATE = '''
from dataclasses import replace
from kvsched.reference import ContinuousScheduler

class Late(ContinuousScheduler):
    """Finishes requests twice (REQ-2) only past 12 arrivals: the teaching trace's 9 pass, so
    only the search, which kvsched imports after the target is loaded, can find it."""

    def __init__(self, limits):
        super().__init__(limits)
        self._seen, self._last = 0, ()

    def add_request(self, request):
        self._seen += 1
        super().add_request(request)

    def update_from_output(self, output):
        outcome = super().update_from_output(output)
        if self._seen <= 12:
            return outcome
        again, self._last = self._last, outcome.finished
        return replace(outcome, finished=outcome.finished + again)
'''

SHIM = """
import os
# The working folder: the first entry of kvsched's path under ``python -m kvsched``. (Planting in
# every entry would, uncontained and as root, overwrite the real Hypothesis.)
try:
    os.makedirs("hypothesis", exist_ok=True)
    with open(os.path.join("hypothesis", "__init__.py"), "w") as file:
        file.write("def given(*a, **k):\\n    return lambda f: lambda *x, **y: None\\n")
except OSError:
    pass
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_planted_hypothesis_is_never_imported(tmp_path: Path, sandbox: str) -> None:
    """The target plants ``hypothesis/`` in the working folder before kvsched imports it."""
    (tmp_path / "late.py").write_text(SHIM + LATE, encoding="utf-8")
    search = ("--max-examples", "100", "--z3-requests", "0", "--budget", "60")
    command = [sys.executable, "-m", "kvsched", "check", "late.py:Late", "--sandbox", sandbox]
    result = subprocess.run(
        [*command, *search], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result
    assert "REQ-2 violated" in result.stdout, result
    planted = (tmp_path / "hypothesis").exists()
    assert planted == (sandbox == "none"), "only an uncontained target can plant it"


PROBE = """
import json, sys
sys.path[:0] = [{harness!r}]
from kvsched.checks.targets import process
from kvsched.cli import main
started = []
boot = process.HostProcess.__init__
def init(self, *args, **kwargs):
    boot(self, *args, **kwargs)
    started.append(set(sys.modules))
process.HostProcess.__init__ = init
code = main(["check", *sys.argv[1:]])
print(json.dumps([code, sorted(set(sys.modules) - started[0])]), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "target, code",
    [("late.py:Late", 1), ("kvsched.reference:ContinuousScheduler", 0), ("leak.py", 1)],
    ids=["found-by-the-search", "passing", "learner"],
)
def test_kvsched_imports_nothing_once_the_target_runs(
    tmp_path: Path, target: str, code: int
) -> None:
    """Every module a check needs is imported before the host starts: a fresh kvsched process
    that finds, passes and judges a learner, with every output, imports none after."""
    (tmp_path / "late.py").write_text(LATE, encoding="utf-8")
    learner = Path(sandboxes.__file__).parents[1] / "mutants" / "learner" / "buggy_leak.py"
    (tmp_path / "leak.py").write_text(learner.read_text(encoding="utf-8"), encoding="utf-8")
    probe = PROBE.format(harness=str(Path(__file__).parent))
    options = ["--max-examples", "60", "--json", "--junit-xml", "j.xml", "--z3-requests", "2"]
    result = subprocess.run(
        [sys.executable, "-c", probe, target, *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    exit_code, late = json.loads(result.stderr.strip().splitlines()[-1])
    assert exit_code == code, result
    assert late == [], f"imported after the target started: {late}"


SIGNALS = """
import os, signal

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        for pid in (os.getppid(), 1, -1 if {everyone} else 0):
            try:
                os.kill(pid, signal.{name}) if pid else None
            except OSError:
                pass
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGSTOP", "SIGKILL"])
@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_contained_target_cannot_signal_kvsched(tmp_path: Path, sandbox: str, name: str) -> None:
    write_attack(tmp_path, SIGNALS.format(name=name, everyone=name != "SIGSTOP"))
    failed(check_program(tmp_path, "attack.py:Attack", "--sandbox", sandbox), "REQ-2 violated")


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_an_uncontained_targets_signal_is_never_a_pass(
    tmp_path: Path, name: str, code: int
) -> None:
    """Without a sandbox the signal arrives; kvsched says it was interrupted, never exit 0."""
    write_attack(tmp_path, SIGNALS.format(name=name, everyone=False))
    outcome = check_program(tmp_path, "attack.py:Attack", "--sandbox", "none")
    assert outcome.code == code, outcome
    assert "Traceback" not in outcome.err


DAEMON = """
import os, subprocess, sys

LATER = '''
import sys, time
time.sleep(1.5)
for path in sys.argv[1:]:
    try:
        with open(path, "w") as file:
            file.write('{{"ok": true}}  <testsuite failures="0"/>')
    except OSError:
        pass
# MARK
'''

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                subprocess.Popen([sys.executable, "-c", LATER, {outputs}], start_new_session=True)
            os._exit(0)
        os.wait()
"""


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_daemon_cannot_rewrite_the_outputs_after_kvsched_exits(
    tmp_path: Path, sandbox: str, marker: str
) -> None:
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    outputs = ", ".join(repr(str(p)) for p in (junit, report))
    write_attack(tmp_path, DAEMON.format(outputs=outputs).replace("MARK", marker))
    command = [sys.executable, "-m", "kvsched", "check", "attack.py:Attack", *FAST]
    with report.open("w") as out:
        code = subprocess.run(
            [*command, "--sandbox", sandbox, "--json", "--junit-xml", str(junit)],
            cwd=tmp_path,
            stdout=out,
            timeout=120,
        ).returncode
    assert code == 1
    time.sleep(2.5)  # the daemon would have written by now
    assert not processes_with(marker)
    assert json.loads(report.read_text())["ok"] is False
    assert 'failures="1"' in junit.read_text()


SLEEPS = """
import subprocess, sys, time

class Attack(Buggy):
    def schedule(self):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # MARK"])
        time.sleep(60)
"""


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # not a process, or gone meanwhile
            continue
        if int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_kvsched_killed_takes_the_host_with_it(tmp_path: Path, sandbox: str, marker: str) -> None:
    """SIGKILL while a call is inside the target: the host dies with kvsched, and in a sandbox
    everything the target started too."""
    write_attack(tmp_path, SLEEPS.replace("MARK", marker))
    command = [sys.executable, "-m", "kvsched", "check", "attack.py:Attack", *FAST]
    kvsched = subprocess.Popen(
        [*command, "--sandbox", sandbox, "--timeout", "120"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(marker), "the target never got to schedule()"
    hosts = _children(kvsched.pid)
    assert hosts
    kvsched.kill()
    kvsched.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and [p for p in hosts if _alive(p)]:
        time.sleep(0.1)
    assert not [p for p in hosts if _alive(p)], "the host outlived kvsched"
    if sandbox != "none":
        assert not processes_with(marker), "a process of the target's outlived kvsched"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


REACHES = """
import os, socket, tempfile

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as error:
        return type(error).__name__

def connect():
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()

class Attack(Buggy):
    def __init__(self, limits):
        super().__init__(limits)
        cwd = attempt(lambda: open("planted.txt", "w").close())
        scratch = attempt(lambda: open(os.path.join(tempfile.gettempdir(), "x"), "w").close())
        raise RuntimeError(f"reach cwd={{cwd}} scratch={{scratch}} net={{attempt(connect)}}")
"""


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_a_contained_target_writes_only_its_scratch_folder(
    tmp_path: Path, capsys: object, sandbox: str
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        path = write_attack(tmp_path, REACHES.format(port=listener.getsockname()[1]))
        outcome = check_in_process(capsys, f"{path}:Attack", "--sandbox", sandbox)
        failed(outcome, "PROTO-1", "scratch=ok")
        assert "cwd=ok" not in outcome.out
        assert not (tmp_path / "planted.txt").exists()
        if sandbox == "bwrap":
            assert "net=ok" not in outcome.out
            with pytest.raises(BlockingIOError):
                listener.accept()


def test_an_uncontained_verdict_says_so(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, "class Attack(Buggy):\n    pass\n")
    outcome = check_in_process(capsys, f"{path}:Attack", "--sandbox", "none", "--json")
    notes = " ".join(json.loads(outcome.out)["notes"])
    assert "sandbox: none" in notes and "--sandbox none was asked for" in notes
    refused = check_in_process(capsys, f"{path}:Attack", "--sandbox", "none", "--require-sandbox")
    assert refused.code == 2 and "--require-sandbox" in refused.err


def test_where_no_containment_exists_the_verdict_says_why(
    tmp_path: Path, capsys: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine with neither bubblewrap nor root: ``sandbox: none``, the reason, and exit 2
    under ``--require-sandbox``."""
    monkeypatch.setattr(sandboxes, "bwrap_program", lambda: None)
    monkeypatch.setattr(sandboxes, "_uid_refusal", lambda: "kvsched is not root (simulated)")
    sandboxes.contain.cache_clear()
    try:
        path = write_attack(tmp_path, "class Attack(Buggy):\n    pass\n")
        outcome = check_in_process(capsys, f"{path}:Attack")
        failed(outcome, "sandbox: none", "no bwrap program", "not root (simulated)")
        refused = check_in_process(capsys, f"{path}:Attack", "--require-sandbox")
        assert refused.code == 2, refused
        assert "no containment" in refused.err and "bubblewrap" in refused.err
    finally:
        sandboxes.contain.cache_clear()


def test_the_default_is_the_strongest_containment_here() -> None:
    """Which path the attacks above ran by default on this machine, in the test log (-rA)."""
    got = sandboxes.contain("auto")
    print(got.describe())
    refusal = sandboxes._bwrap_refusal()
    assert (got.kind == "bwrap") == (not refusal), refusal
