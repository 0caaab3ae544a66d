"""The host process seen from kvsched: started fresh, watched, read with deadlines, killed whole.

:class:`HostProcess` starts :mod:`.host` in a new session (so ``killpg`` ends everything the
target started), under memory and CPU rlimits, with the target's stdout and stderr on pipes this
side drains while it waits and caps (:mod:`.confinement` holds the limits). Each exchange sends one
frame and waits for one answer until the call's deadline or the check's budget, whichever comes
first. Whatever goes wrong on that side (the process died, hung, wrote too much, sent a frame that
is not one) ends the process and raises :class:`HostFailure`, a ``BaseException``: the check stops
there with a PROTO-1 verdict, and no layer in between (the engine, Hypothesis) mistakes it for an
ordinary answer of the target's.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections import deque
from typing import NoReturn

from kvsched.checks.targets import wire
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.sandbox import Jail, host_python, memory_used, seal_path

_TAIL_BYTES = 2000
_READ_BYTES = 1 << 16
_EXIT_GRACE_SECONDS = 2.0
"""How long a host whose wire closed may take to exit before it counts as having closed it."""
_WATCH_SECONDS = 0.25
"""How often the memory and scratch space of the target's processes are measured while kvsched
waits on it: often enough that a tree of forks is stopped before it holds many times its limit,
seldom enough that reading /proc (some milliseconds) takes little from the target."""


class HostFailure(BaseException):
    """The host process stopped answering as the wire demands; the message says how and where."""


class BudgetSpent(HostFailure):
    """The check's overall budget ran out; noticed while waiting on the target."""


class HostProcess:
    """One running host; :meth:`exchange` is the only way to talk to the target."""

    def __init__(self, confinement: Confinement, budget_ends: float, target: str = "") -> None:
        self.confinement = confinement
        self.budget_ends = budget_ends
        to_host_r, self._to_host = os.pipe()
        self._from_host, from_host_w = os.pipe()
        cpu = int(confinement.budget_seconds) + 5
        seal_path()
        self.jail = Jail(confinement.containment(), target, confinement.scratch_mb)
        serve = "from kvsched.checks.targets.host import main; main(sys.argv[2:])"
        command = [*host_python(self.jail.drop_to), serve, str(to_host_r), str(from_host_w)]
        command += [str(confinement.memory_mb), str(cpu)]
        try:
            self._process = subprocess.Popen(
                self.jail.command(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(to_host_r, from_host_w),
                start_new_session=True,
                env=self.jail.environment(),
                preexec_fn=self.jail.preexec(),
            )
        except BaseException:
            self.jail.close()
            raise
        self.closed = False
        self.garbled = False
        """Whether the host wrote on the wire what the wire does not allow (not a frame, a frame
        unasked, a closed wire), as against hanging, dying or breaking a limit."""
        self._watched = time.monotonic()
        try:  # an interrupt from here on must still end the host
            self.jail.started(self._process.pid)
            os.close(to_host_r)
            os.close(from_host_w)
            self._outputs = {
                self._process.stdout.fileno(): _Tail("stdout"),  # type: ignore[union-attr]
                self._process.stderr.fileno(): _Tail("stderr"),  # type: ignore[union-attr]
            }
            for fd in (self._to_host, self._from_host, *self._outputs):
                os.set_blocking(fd, False)
            self._buffer = bytearray()
            self._poller = select.poll()
            for fd in (self._from_host, *self._outputs):
                self._poller.register(fd, select.POLLIN)
            self._poller.register(self._to_host, 0)
        except BaseException:
            self.kill()
            raise

    def exchange(
        self, frame: bytes, doing: str, seconds: float | None = None, follows: bool = False
    ) -> bytes:
        """Send ``frame``, return the answer's payload; HostFailure if none comes in time.

        The answer must come within ``seconds``, by default the confinement's per-call limit.
        ``follows``: the request is answered in several frames, which :meth:`answer` reads.
        """
        if self.closed:
            raise HostFailure(f"{doing}: the target's process had already ended")
        if frame:  # an empty frame waits for the host's first word, which it sends unasked
            self.unasked(doing, 0.0)
        pending = self._send_now(memoryview(frame), doing)
        return self._await(pending, doing, seconds, follows)

    def answer(self, doing: str, seconds: float | None = None) -> bytes:
        """The next frame of a request answered in several (:meth:`exchange`'s ``follows``),
        which must come within ``seconds`` of now: a call's time is counted from when kvsched
        starts waiting for its answer, so a frame that comes late proves a slow call."""
        if self.closed:
            raise HostFailure(f"{doing}: the target's process had already ended")
        return self._await(memoryview(b""), doing, seconds, True)

    def _await(
        self, pending: memoryview, doing: str, seconds: float | None, follows: bool
    ) -> bytes:
        seconds = self.confinement.call_seconds if seconds is None else seconds
        call_ends = time.monotonic() + seconds
        while True:
            payload = self._take_frame(doing)
            if payload is not None and not pending:
                if self._buffer and not follows:
                    self._out_of_order(doing)
                return payload
            now = time.monotonic()
            if now >= self.budget_ends:
                self.kill()
                raise BudgetSpent(
                    f"the check's budget of {self.confinement.budget_seconds:g} s ran out during "
                    f"{doing}{self.tail()}"
                )
            if now >= call_ends:
                self.kill()
                raise HostFailure(
                    f"{doing} did not return within {seconds:g} s (the "
                    f"target hangs or is far too slow){self.tail()}"
                )
            pending = self._pump(pending, min(call_ends, self.budget_ends) - now, doing)

    def unasked(self, doing: str, seconds: float) -> None:
        """HostFailure if the host sent anything while no request was open, waiting up to
        ``seconds`` for it. The host answers each request once: a second frame is code in the
        target's process writing on kvsched's wire (a forged answer sent ahead of the host's)."""
        if self.closed:
            return
        ends = time.monotonic() + seconds
        while True:
            self._pump(memoryview(b""), max(ends - time.monotonic(), 0.0), doing)
            if self._buffer:
                self._out_of_order(doing)
            if time.monotonic() >= ends:
                return

    def _out_of_order(self, doing: str) -> NoReturn:
        self.garbled = True
        self.kill()
        raise HostFailure(
            f"after {doing} the target's process sent a frame kvsched had not asked for (the "
            "host answers each request once; code of the target's wrote on kvsched's wire)"
            f"{self.tail()}"
        )

    def _send_now(self, pending: memoryview, doing: str) -> memoryview:
        """What is left of ``pending`` after writing what the pipe takes without waiting."""
        try:
            return pending[os.write(self._to_host, pending) :] if pending else pending
        except BlockingIOError:
            return pending
        except BrokenPipeError:
            self._died(doing)

    def _pump(self, pending: memoryview, seconds: float, doing: str) -> memoryview:
        """Wait up to ``seconds`` for anything to read or room to write; handle what came."""
        self._watch(doing)
        self._poller.modify(self._to_host, select.POLLOUT if pending else 0)
        waited = min(max(seconds, 0.0), _WATCH_SECONDS)  # the limits are watched meanwhile
        for fd, events in self._poller.poll(waited * 1000):
            if fd == self._to_host:
                pending = self._send_now(pending, doing)
            elif fd in self._outputs:
                self._drain(fd, doing)
            else:
                # 64 KiB: os.read allocates the whole size first, and a bigger buffer is a fresh
                # mmap per read, which costs more than the answer itself.
                chunk = (
                    os.read(fd, _READ_BYTES) if events & (select.POLLIN | select.POLLHUP) else b""
                )
                if not chunk:
                    self._died(doing)
                self._buffer += chunk
        return pending

    def _watch(self, doing: str) -> None:
        """End the target if its processes together break the memory or scratch limit, which
        no rlimit of one process bounds: a tree of forks, files spread under the per-file cap."""
        now = time.monotonic()
        if now < self._watched + _WATCH_SECONDS:
            return
        self._watched = now
        mib = 1024 * 1024
        held = memory_used(self.jail.processes(self._process.pid))
        if held > self.confinement.memory_mb * mib:
            self.kill()
            raise HostFailure(
                f"during {doing} the target's processes together held {held // mib} MiB of "
                f"memory, over the limit of {self.confinement.memory_mb} MiB (--memory-mb)"
                f"{self.tail()}"
            )
        written = self.jail.scratch_used()
        if written > self.confinement.scratch_mb * mib:
            self.kill()
            raise HostFailure(
                f"during {doing} the target's scratch folder held {written // mib} MiB, over "
                f"the limit of {self.confinement.scratch_mb} MiB (--scratch-mb){self.tail()}"
            )

    def _take_frame(self, doing: str) -> bytes | None:
        if len(self._buffer) < 4:
            return None
        try:
            length = wire.frame_length(bytes(self._buffer[:4]))
        except wire.WireError as error:
            self.garbled = True
            self.kill()
            raise HostFailure(f"{doing}: the target's process sent {error}{self.tail()}") from None
        if len(self._buffer) < 4 + length:
            return None
        payload = bytes(self._buffer[4 : 4 + length])
        del self._buffer[: 4 + length]
        return payload

    def _drain(self, fd: int, doing: str) -> None:
        tail = self._outputs[fd]
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        tail.add(chunk)
        written = sum(t.total for t in self._outputs.values())
        if written > self.confinement.output_bytes:
            self.kill()
            raise HostFailure(
                f"during {doing} the target wrote more than {self.confinement.output_bytes} bytes "
                "to stdout and stderr, the limit (print less, or raise --output-limit)"
                f"{self.tail()}"
            )

    def _died(self, doing: str) -> NoReturn:
        """The wire closed: the process ended, or the target closed kvsched's pipes itself."""
        try:
            self._process.wait(timeout=_EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.garbled = True
            self.kill()
            raise HostFailure(
                f"during {doing} the target closed kvsched's wire and went on running; only "
                f"kvsched's host may use it{self.tail()}"
            ) from None
        for fd in list(self._outputs):
            self._drain_rest(fd)
        code = self._process.returncode
        how = (
            f"was killed by signal {signal.Signals(-code).name}"
            if code is not None and code < 0 and -code in signal.Signals._value2member_map_
            else f"exited with code {code}"
        )
        self.kill()
        raise HostFailure(
            f"the target's process {how} during {doing}; a scheduler must answer, not exit"
            f"{self.tail()}"
        )

    def _drain_rest(self, fd: int) -> None:
        for _ in range(64):  # what is left in the pipe, at most a little over the cap
            try:
                chunk = os.read(fd, 1 << 16)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self._outputs[fd].add(chunk)

    def tail(self) -> str:
        """The end of what the target wrote, as a paragraph of the verdict; "" if nothing."""
        shown = [t.text() for t in self._outputs.values() if t.total]
        return "".join(f"\n{text}" for text in shown)

    def kill(self) -> None:
        """End the host and everything it started (its whole session); close the pipes."""
        if self.closed:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self.closed = True  # only once the kill is sent: an interrupt before it kills again
        self._process.wait()
        self.jail.close()
        for fd in (self._to_host, self._from_host):
            os.close(fd)
        for stream in (self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()


class _Tail:
    """The last bytes of one output stream, and how many were written in all."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.total = 0
        self._chunks: deque[bytes] = deque()
        self._kept = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._chunks.append(chunk)
        self._kept += len(chunk)
        while self._kept - len(self._chunks[0]) >= _TAIL_BYTES:
            self._kept -= len(self._chunks.popleft())

    def text(self) -> str:
        data = b"".join(self._chunks)[-_TAIL_BYTES:]
        text = data.decode("utf-8", "replace").encode("ascii", "backslashreplace").decode()
        shown = wire.printable(text[-wire.TEXT_LIMIT :])  # the last lines, which printable keeps
        return f"The target's {self.name} ({self.total} bytes), last lines:\n{shown.rstrip()}"
