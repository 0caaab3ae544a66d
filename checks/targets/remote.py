"""A target in its host process, seen from kvsched as an ordinary scheduler or learner's file.

:class:`RemoteTarget` loads TARGET in a :class:`~.process.HostProcess` and hands the check what
:func:`~.load.load_target` would have: a :class:`~.load.SchedulerTarget` whose factory builds
:class:`RemoteScheduler` proxies, or a :class:`~.load.LearnerTarget` whose functions are
:class:`RemoteFunction` proxies. The engine, the monitor and Hypothesis drive these proxies
exactly as they drive a scheduler in this process; each call is one exchange on the wire, and
each answer is decoded strictly into the protocol's own type. What the target answers is judged
like any answer: an exception it raised comes back as an exception of the same built-in kind
(so ``except ValueError`` still matches), a value that is not plain data or not the promised type
as :class:`AnswerError`. Both are PROTO-1 findings, and so is an answer bigger than what
kvsched gave the target allows (:mod:`.bounds`), refused before it is decoded or expanded. A host
that dies, hangs or garbles the wire raises :class:`~.process.HostFailure`, which ends the check.
"""

from __future__ import annotations

import builtins
import itertools
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import msgspec

from kvsched.checks.targets import bounds, wire
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.learner import LEARNER_FUNCTIONS, Ahead, LearnerSolution
from kvsched.checks.targets.load import (
    Kind,
    LearnerTarget,
    SchedulerTarget,
    TargetError,
    neither_function,
    target_kind,
)
from kvsched.checks.targets.process import BudgetSpent, HostFailure, HostProcess
from kvsched.checks.targets.source import defined_functions
from kvsched.spec.properties import PropertiesError, parse_properties
from kvsched.spec.protocol import ModelOutput, ScheduledBatch, Scheduler, StepOutcome
from kvsched.spec.vocabulary import POLICY_NAMES
from kvsched.spec.workload import Limits, Request

T = TypeVar("T")


class TargetRaised(Exception):
    """An exception the target raised in a call; its class name and text are the target's."""

    remote_frames = ""
    """The target's own frames, formatted where it ran (see reference/tracebacks.py)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class AnswerError(Exception):
    """The target answered a call with something the protocol does not allow."""


STARTUP_SECONDS = 60.0
"""How long the host process may take to start, before the target is imported."""

UNASKED_SECONDS = 0.2
"""How long a check waits, after its last answer, for a frame the host was not asked for."""

AHEAD_MOST = 64
"""The most iterations of a learner's run one round trip asks for (:meth:`RemoteTarget.step`);
the fewest is two, so that the pace of a slow host is still measured."""
AHEAD_SECONDS = 0.02
"""About how long the iterations one round trip asks for may take: a learner whose calls are
slow is asked for fewer, so that a run that ends early (the shrinker's horizon, a fault) leaves
the host little work that nobody reads. Each is still a call of its own, under its deadline."""


@dataclass
class _Stream:
    """The frames still to come of a step that asked the host to run ahead."""

    key: int
    iteration: int
    """The iteration whose answer the next frame is."""
    left: int
    sent: float
    """When the step was sent (time.monotonic), to measure the host's pace."""
    read: int = 1


_KINDS: dict[tuple[str, str], type[TargetRaised]] = {}
_NIL = b"\xc0"


class RemoteTarget:
    """TARGET loaded in a host process; :meth:`load` first, :meth:`close` always."""

    def __init__(self, spec: str, confinement: Confinement, kind: Kind | None = None) -> None:
        self.spec = spec
        self.kind = kind or target_kind(spec)
        """kvsched's own reading of the target (:func:`~.load.target_kind`), never the host's."""
        self.confinement = confinement
        self.doing = f"importing {spec}"
        """What the check is asking of the target now, for the messages of a failure."""
        self._budget_ends = time.monotonic() + confinement.budget_seconds
        self._host: HostProcess | None = None
        self._handles = itertools.count(1)
        self._dropped: list[int] = []
        self._methods = wire.protocol_methods()
        self._readers = {name: wire.decoder(m.answer) for name, m in self._methods.items()}
        self._description = wire.decoder(wire.Description)
        self._raised = wire.decoder(wire.Raised)
        self._text = wire.decoder(str)
        self._any = wire.decoder(Any)
        self._held: tuple[int, list[Any] | None, int] = (0, None, 0)
        self._pending = (0, 0)
        """The learner's run whose finished requests the host holds (:meth:`step`): its key,
        the list kvsched holds them in once it took the answer, and their bytes."""
        self._stream: _Stream | None = None
        self._ahead = 2
        """Iterations one step asks for: grown while the host answers fast (:meth:`_paced`)."""
        self.restarts = 0
        """Hosts replaced after failing in iterations run ahead past a run (:meth:`_drain`)."""

    def load(self) -> SchedulerTarget | LearnerTarget:
        """Import TARGET in a new host; TargetError if it cannot be loaded (exit 2)."""
        status, raw = self._start()
        if len(raw) > bounds.TEXT_BYTES:  # a description or refusal is a few lines
            self._garbled(f"answered the import with {len(raw):,} bytes")
        if status == "refused":
            raise TargetError(wire.printable(self._decode(self._text, raw, "the refusal")))
        if status != "ok":
            self._garbled(f"answered the import with '{status}'")
        description = self._decode(self._description, raw, "the description of the target")
        if description.policy not in ("", *POLICY_NAMES):
            self._garbled(f"described the policy {description.policy[:40]!r}")
        kind = self.kind
        if description.kind != kind:
            self._garbled(f"described a {description.kind} where kvsched reads a {kind}")
        if kind == "learner":
            # The functions the source defines; where it cannot be read, both are asked for and
            # each call shows whether it is there.
            defined = defined_functions(self.spec)
            if defined == ():  # as a module that binds neither is refused in this process
                raise TargetError(
                    f"{neither_function(self.spec)} at its top level: kvsched reads them off "
                    "the source (a def, an assignment or an import), not from what running it "
                    "made"
                )
            names = LEARNER_FUNCTIONS if defined is None else defined
            functions = {name: RemoteFunction(self, name) for name in names}
            solution = LearnerSolution(
                self.spec,
                functions.get("allocate_kv_pages"),
                functions.get("schedule_iteration"),
                isolated=True,
            )
            return LearnerTarget(self.spec, solution)
        properties = None
        if description.properties is not None:
            try:
                properties = parse_properties(description.properties, f"{self.spec}: properties")
            except PropertiesError as error:
                raise TargetError(str(error)) from None
        return SchedulerTarget(self.spec, self.scheduler, description.policy, properties)

    def _start(self) -> tuple[wire.Status, msgspec.Raw]:
        """A new host, asked to import TARGET: the status and payload of its answer."""
        self._host = HostProcess(self.confinement, self._budget_ends, self.spec)
        # Starting Python and kvsched is not the target's time, and may be slow on a busy machine.
        startup = max(self.confinement.call_seconds, STARTUP_SECONDS)
        ready = self._host.exchange(b"", "starting the target's process", startup)
        if wire.split_reply(ready)[0] != "ok":
            self._garbled("did not start as kvsched's host")
        status, raw, _ = self._exchange(["load", self.spec])
        return status, raw

    def _restart(self) -> None:
        """A learner's host that failed while running iterations no call asked for (the run had
        ended), replaced by a new one: kvsched judges only what it asks for, and would not have
        asked for those. The new host holds no finished requests."""
        assert self._host is not None
        self._host.kill()
        self._held, self._pending = (0, None, 0), (0, 0)
        self.restarts += 1
        if self._start()[0] != "ok":
            self._garbled("did not import the target again, as it had before")

    def scheduler(self, limits: Limits) -> Scheduler:
        """A new scheduler built by the target in the host: ``Class(limits)`` over there."""
        handle = next(self._handles)
        dropped, self._dropped = self._dropped, []
        held = bounds.SchedulerBounds(limits)
        reply = self._exchange(["new", handle, limits, dropped])
        self._answer(reply, None, "the constructor", held.budget("new"))
        proxy = RemoteScheduler(self, handle, held)
        weakref.finalize(proxy, self._dropped.append, handle)
        return proxy

    def call(self, handle: int, method: str, argument: Any, held: bounds.SchedulerBounds) -> Any:
        message: list[Any] = ["call", handle, method]
        if argument is not None:
            message.append(argument)
        call = f"{method}()"
        answer = self._answer(
            self._exchange(message), self._readers[method], call, held.budget(method)
        )
        try:
            held.check(method, answer)
        except bounds.BoundError as error:
            raise AnswerError(f"{call} answered outside the protocol: {error}") from None
        return answer

    def function(self, name: str, arguments: tuple[Any, ...]) -> Any:
        def most(sent: int, size: int) -> tuple[int, bounds.Why]:
            return bounds.function_bytes(sent, arguments)

        return self._answer(
            self._exchange(["fn", name, list(arguments)]), self._any, f"{name}()", most
        )

    def step(
        self,
        key: int,
        given: dict[str, Any],
        limits: dict[str, int],
        policy: str,
        ahead: Ahead | None = None,
    ) -> Any:
        """``schedule_iteration(given, limits, policy)`` for the run numbered ``key``, sending
        only the finished requests the host does not hold (host.py, ``_Served._step``).

        Returns ``(kept, state)``: the host found the first ``kept`` of ``given``'s finished
        requests unchanged, byte for byte, in what the learner returned, and ``state`` holds the
        rest of it. The answer is held to the bound of the whole state's bytes.

        With ``ahead``, one round trip asks for this iteration and up to :attr:`_ahead` - 1
        next ones of the run, which the host runs by itself from the states kvsched would send
        (learner.py, ``Ahead``) and answers a frame each; the next calls of the run read those
        frames instead of sending. Each frame is judged as the answer to the state kvsched
        holds then, under the bounds and deadline of a call of its own, as if it had been sent.
        """
        finished: list[Any] = given["finished"]
        held_key, held, held_bytes = self._held
        kept = len(finished) if held_key == key and held is finished else 0
        self._held, self._pending = (key, None, 0), (0, 0)
        arguments = ({**given, "finished": finished[kept:]}, limits, policy)
        unsent = held_bytes if kept else 0
        message: list[Any] = ["step", key, kept, list(arguments)]

        def most(sent: int, size: int) -> tuple[int, bounds.Why]:
            """The bound of an answer of ``size`` bytes to the call as sent unbatched, of
            ``sent`` bytes (-1: not sent, measured only if the answer is over the bound of a
            call that sends nothing, which is never above the call's own)."""
            floor = bounds.function_bytes(unsent, arguments)
            if sent < 0 and size <= floor[0]:
                return floor
            return bounds.function_bytes(unsent + (sent if sent >= 0 else sized()), arguments)

        def sized() -> int:
            return len(wire.encode(message))

        call = "schedule_iteration()"
        stream, reply = self._stream, None
        if (
            ahead is not None
            and stream is not None
            and (stream.key, stream.iteration) == (key, given["iteration"])
            and stream.left
        ):
            reply = self._streamed(stream)
        if reply is None:
            arrivals = ahead.arrivals(self._ahead - 1) if ahead is not None else []
            if ahead is not None and arrivals:
                started = time.monotonic()
                # Past the bound of this call's answer, the host runs no further ahead: an
                # answer kvsched may refuse is never the input of another call.
                bound = most(-1, 1 << 62)[0]
                asked = [*message, arrivals, ahead.total, bound]
                status, raw, _ = self._exchange(asked, follows=True)
                if status == "ok":  # any other answer is the host's last for this step
                    self._stream = _Stream(key, given["iteration"] + 1, len(arrivals), started)
                reply = (status, raw, -1)
            else:
                reply = self._exchange(message)
        same, state = self._answer(reply, self._any, call, most, stepped=True)
        if not 0 <= same <= kept:
            self._garbled(f"answered a step keeping {kept} requests with {same}")
        tail = state.get("finished") if isinstance(state, dict) else None
        if isinstance(tail, list):
            try:
                tail_bytes = len(wire.encode(tail)) - 4
            except (TypeError, ValueError, OverflowError):
                tail_bytes = 0
            self._pending = (key, (held_bytes if same else 0) + tail_bytes)
        return same, state

    def _streamed(self, stream: _Stream) -> tuple[wire.Status, msgspec.Raw, int] | None:
        """The next frame of ``stream``, as the answer to its iteration; None if the host
        stopped running ahead there (the caller sends the state instead)."""
        assert self._host is not None
        payload = self._host.answer(self.doing)
        stream.left -= 1
        stream.iteration += 1
        stream.read += 1
        try:
            status, raw = wire.split_reply(payload)
        except wire.WireError as error:
            self._garbled(f"sent {error}")
        if status != "ok":
            self._stream = None  # a frame that is not an answer ends what the host runs
            if status == "stopped":
                return None
        elif not stream.left:
            self._stream = None
            self._paced(stream)
        return status, raw, -1

    def _paced(self, stream: _Stream) -> None:
        """Ask for more iterations per step while the host answers fast, fewer once it does
        not: its pace over ``stream``, read to its end."""
        pace = (time.monotonic() - stream.sent) / stream.read
        fits = int(AHEAD_SECONDS / pace) if pace > 0 else AHEAD_MOST
        self._ahead = max(2, min(fits, 2 * self._ahead, AHEAD_MOST))

    def _drain(self, restart: bool = True) -> None:
        """Read and set aside the frames still to come of a step run ahead that the run no
        longer needs (it ended, or went on otherwise): they answer no call of kvsched's.

        A host that hangs, dies or breaks a limit in those iterations failed in a call kvsched
        would not have made: it is replaced (``restart``) or, after the check's last call,
        ended, and judged for nothing. Whatever is on the wire is still read as the wire
        demands: a frame that is not one is a HostFailure."""
        stream, self._stream = self._stream, None
        assert self._host is not None
        while stream is not None and stream.left:
            try:
                payload = self._host.answer(f"{self.doing} (an iteration run ahead, unasked)")
            except BudgetSpent:
                raise
            except HostFailure:
                if not self._host.closed or self._host.garbled:
                    raise
                if restart:
                    self._restart()
                return
            stream.left -= 1
            try:
                if wire.split_reply(payload)[0] != "ok":
                    return  # the host ends what it runs ahead with any other answer
            except wire.WireError as error:
                self._garbled(f"sent {error}")

    def holds(self, key: int, finished: list[Any]) -> None:
        """kvsched took the last step's answer of run ``key``: its finished requests, which the
        host holds the equal of, are ``finished``."""
        pending_key, size = self._pending
        if pending_key == key:
            self._held = (key, finished, size)

    def finish(self) -> None:
        """HostFailure if the host sent a frame after its last answer (:meth:`.HostProcess.
        unasked`), waiting a moment for one that a forger sent ahead of the host's own."""
        if self._host is not None:
            self._drain(restart=False)
            self._host.unasked(f"{self.doing}, the last call", UNASKED_SECONDS)

    def close(self) -> None:
        if self._host is not None:
            self._host.kill()

    def _answer(
        self,
        reply: tuple[wire.Status, msgspec.Raw, int],
        reader: Callable[[Any], Any] | None,
        call: str,
        most: Callable[[int, int], tuple[int, bounds.Why]],
        stepped: bool = False,
    ) -> Any:
        """The answer ``reply`` (:meth:`_exchange`'s), read by ``reader``; ``most`` gives, from
        the bytes sent and the answer's, the most bytes a value may answer with and why.
        ``stepped``: a learner's step, answered ``[kept, value]``, which returns ``(kept,
        value)`` (:meth:`step`)."""
        status, raw, sent = reply
        if status == "stopped":  # only the frames of a step run ahead may say it (_streamed)
            self._garbled(f"answered {call} with 'stopped'")
        kept = 0
        if stepped and status == "ok":
            try:
                kept, raw = wire.split_step(raw)
            except wire.WireError as error:
                self._garbled(f"sent {error}")
        try:
            if status == "ok":
                bounds.check_size(raw, *most(sent, len(raw)))
            else:  # the host cuts every text it sends; a longer one was not written by it
                bounds.check_size(raw, bounds.TEXT_BYTES, "an exception's text can need")
        except bounds.BoundError as error:
            raise AnswerError(f"{call} answered outside the protocol: {error}") from None
        if status == "ok":
            if reader is None:
                if bytes(raw) != _NIL:  # the host answers these calls with nil, whatever returned
                    self._garbled(f"answered {call} with {len(raw)} bytes, not nil")
                return None
            try:
                value = reader(raw)
            except wire.WireError as error:
                raise AnswerError(f"{call} answered outside the protocol: {error}") from None
            return (kept, value) if stepped else value
        if status == "raised":
            raised = self._decode(self._raised, raw, "an exception")
            failure = _exception(raised.type, raised.builtin)(wire.printable(raised.text))
            failure.remote_frames = wire.printable(raised.frames)
            raise failure
        text = wire.printable(self._decode(self._text, raw, f"the '{status}' answer"))
        if status == "exited":
            raise AnswerError(f"{call} called {text}; a scheduler must answer, not exit")
        if status == "unsendable":
            raise AnswerError(f"{call} answered with {text}")
        if status == "refused":  # what kvsched read in the source is not there when run
            assert self._host is not None
            self._host.kill()
            raise HostFailure(
                f"{call}: {self.spec}'s source defines it, but its process answers that {text}; "
                f"only what kvsched observes is judged{self._host.tail()}"
            )
        self._garbled(f"answered a call with '{status}'")

    def _exchange(
        self, message: list[Any], follows: bool = False
    ) -> tuple[wire.Status, msgspec.Raw, int]:
        """The status and still-encoded payload of the answer to ``message``, and the bytes
        sent. ``follows``: more frames answer it (:meth:`step`)."""
        assert self._host is not None, "load() starts the host"
        self._drain()
        try:
            frame = wire.encode(message)
        except (TypeError, ValueError, OverflowError) as error:  # kvsched's own data: a bug
            raise RuntimeError(f"cannot send {message[0]!r} to the host: {error}") from error
        payload = self._host.exchange(frame, self.doing, follows=follows)
        try:
            return (*wire.split_reply(payload), len(frame))
        except wire.WireError as error:
            self._garbled(f"sent {error}")

    def _decode(self, reader: Callable[[Any], T], raw: Any, what: str) -> T:
        try:
            return reader(raw)
        except wire.WireError as error:
            self._garbled(f"sent {what} that cannot be read ({error})")

    def _garbled(self, what: str) -> NoReturn:
        assert self._host is not None
        self._host.kill()
        raise HostFailure(
            f"during {self.doing} the target's process {what}; only kvsched's host may write "
            f"on the wire{self._host.tail()}"
        )


class RemoteScheduler:
    """A scheduler living in the host, driven through the scheduler protocol; its answers are
    held to what its limits and the requests it was sent allow."""

    def __init__(self, target: RemoteTarget, handle: int, held: bounds.SchedulerBounds) -> None:
        self._target = target
        self._handle = handle
        self._bounds = held

    def add_request(self, request: Request) -> None:
        self._bounds.add(request)
        self._target.call(self._handle, "add_request", request, self._bounds)

    def schedule(self) -> ScheduledBatch:
        answer: ScheduledBatch = self._target.call(self._handle, "schedule", None, self._bounds)
        return answer

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        answer: StepOutcome = self._target.call(
            self._handle, "update_from_output", output, self._bounds
        )
        return answer


class RemoteFunction:
    """One of a learner's functions, called in the host with plain-data arguments."""

    def __init__(self, target: RemoteTarget, name: str) -> None:
        self._target = target
        self.__name__ = name

    def __call__(self, *arguments: Any) -> Any:
        return self._target.function(self.__name__, arguments)

    def step(
        self,
        key: int,
        given: dict[str, Any],
        limits: dict[str, int],
        policy: str,
        ahead: Ahead | None = None,
    ) -> Any:
        """:meth:`RemoteTarget.step`."""
        return self._target.step(key, given, limits, policy, ahead)

    def holds(self, key: int, finished: list[Any]) -> None:
        """:meth:`RemoteTarget.holds`."""
        self._target.holds(key, finished)


class HostDeadline(Deadline):
    """Names each call for the host's messages; the host process enforces the time itself."""

    def __init__(self, target: RemoteTarget) -> None:
        super().__init__(target.confinement.call_seconds)
        self._target = target

    def call(self, label: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._target.doing = f"{label} on {self.context}" if self.context else label
        return function(*args, **kwargs)


def _exception(name: str, builtin: str) -> type[TargetRaised]:
    """A class named like the target's exception, deriving from the same built-in one."""
    key = (name if name.isidentifier() and len(name) <= 80 else "TargetException", builtin)
    if key not in _KINDS:
        if len(_KINDS) > 256:  # a target inventing names without end gets generic ones
            key = ("TargetException", builtin)
        base = getattr(builtins, builtin, None)
        bases: tuple[type, ...] = (TargetRaised,)
        if isinstance(base, type) and issubclass(base, Exception):
            try:
                base("probe")  # some built-ins (UnicodeDecodeError) need more arguments
                bases = (TargetRaised, base)
            except TypeError:
                pass
        _KINDS.setdefault(key, type(key[0], bases, {}))
    return _KINDS[key]
