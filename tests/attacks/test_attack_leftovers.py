"""What the target leaves behind cannot reach kvsched: daemons, its end, its writes, its words.

Like test_attack_containment.py, each attack runs under every containment this machine has (the
test id names it); those it lacks skip, saying why.
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
    failed,
    processes_with,
    write_attack,
)

from kvsched.checks.targets import sandbox as sandboxes

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
        # The kernel kills the sandbox's processes once its first one dies, not at once.
        deadline = time.monotonic() + 5
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
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
    report = json.loads(outcome.out)
    assert report["sandbox"] == {"kind": "none", "reason": "--sandbox none was asked for"}
    assert "sandbox: none" in " ".join(report["notes"])
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
