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
from typing import Any, NoReturn, TypeVar

import msgspec

from kvsched.checks.targets import bounds, wire
from kvsched.checks.targets.confinement import Confinement
from kvsched.checks.targets.deadline import Deadline
from kvsched.checks.targets.learner import LEARNER_FUNCTIONS, LearnerSolution
from kvsched.checks.targets.load import (
    Kind,
    LearnerTarget,
    SchedulerTarget,
    TargetError,
    target_kind,
)
from kvsched.checks.targets.process import HostFailure, HostProcess
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

    def load(self) -> SchedulerTarget | LearnerTarget:
        """Import TARGET in a new host; TargetError if it cannot be loaded (exit 2)."""
        self._host = HostProcess(self.confinement, self._budget_ends, self.spec)
        # Starting Python and kvsched is not the target's time, and may be slow on a busy machine.
        startup = max(self.confinement.call_seconds, STARTUP_SECONDS)
        ready = self._host.exchange(b"", "starting the target's process", startup)
        if wire.split_reply(ready)[0] != "ok":
            self._garbled("did not start as kvsched's host")
        status, raw, _ = self._exchange(["load", self.spec])
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

    def scheduler(self, limits: Limits) -> Scheduler:
        """A new scheduler built by the target in the host: ``Class(limits)`` over there."""
        handle = next(self._handles)
        dropped, self._dropped = self._dropped, []
        held = bounds.SchedulerBounds(limits)
        self._answer(["new", handle, limits, dropped], None, "the constructor", held.budget("new"))
        proxy = RemoteScheduler(self, handle, held)
        weakref.finalize(proxy, self._dropped.append, handle)
        return proxy

    def call(self, handle: int, method: str, argument: Any, held: bounds.SchedulerBounds) -> Any:
        message: list[Any] = ["call", handle, method]
        if argument is not None:
            message.append(argument)
        call = f"{method}()"
        answer = self._answer(message, self._readers[method], call, held.budget(method))
        try:
            held.check(method, answer)
        except bounds.BoundError as error:
            raise AnswerError(f"{call} answered outside the protocol: {error}") from None
        return answer

    def function(self, name: str, arguments: tuple[Any, ...]) -> Any:
        def most(sent: int) -> tuple[int, str]:
            return bounds.function_bytes(sent, arguments)

        return self._answer(["fn", name, list(arguments)], self._any, f"{name}()", most)

    def step(self, key: int, given: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        """``schedule_iteration(given, limits, policy)`` for the run numbered ``key``, sending
        only the finished requests the host does not hold (host.py, ``_Served._step``).

        Returns ``(kept, state)``: the host found the first ``kept`` of ``given``'s finished
        requests unchanged, byte for byte, in what the learner returned, and ``state`` holds the
        rest of it. The answer is held to the bound of the whole state's bytes.
        """
        finished: list[Any] = given["finished"]
        held_key, held, held_bytes = self._held
        kept = len(finished) if held_key == key and held is finished else 0
        self._held, self._pending = (key, None, 0), (0, 0)
        arguments = ({**given, "finished": finished[kept:]}, limits, policy)
        unsent = held_bytes if kept else 0

        def most(sent: int) -> tuple[int, str]:
            return bounds.function_bytes(sent + unsent, arguments)

        message = ["step", key, kept, list(arguments)]
        same, state = self._answer(message, self._any, "schedule_iteration()", most, stepped=True)
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
            self._host.unasked(f"{self.doing}, the last call", UNASKED_SECONDS)

    def close(self) -> None:
        if self._host is not None:
            self._host.kill()

    def _answer(
        self,
        message: list[Any],
        reader: Callable[[Any], Any] | None,
        call: str,
        most: Callable[[int], tuple[int, str]],
        stepped: bool = False,
    ) -> Any:
        """The answer to ``message``, read by ``reader``; ``most`` gives, from the bytes sent,
        the most bytes a value may answer with and why. ``stepped``: a learner's step, answered
        ``[kept, value]``, which returns ``(kept, value)`` (:meth:`step`)."""
        status, raw, sent = self._exchange(message)
        kept = 0
        if stepped and status == "ok":
            try:
                kept, raw = wire.split_step(raw)
            except wire.WireError as error:
                self._garbled(f"sent {error}")
        try:
            if status == "ok":
                bounds.check_size(raw, *most(sent))
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

    def _exchange(self, message: list[Any]) -> tuple[wire.Status, msgspec.Raw, int]:
        """The status and still-encoded payload of the answer to ``message``, and the bytes
        sent."""
        assert self._host is not None, "load() starts the host"
        try:
            frame = wire.encode(message)
        except (TypeError, ValueError, OverflowError) as error:  # kvsched's own data: a bug
            raise RuntimeError(f"cannot send {message[0]!r} to the host: {error}") from error
        payload = self._host.exchange(frame, self.doing)
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

    def step(self, key: int, given: dict[str, Any], limits: dict[str, int], policy: str) -> Any:
        """:meth:`RemoteTarget.step`."""
        return self._target.step(key, given, limits, policy)

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
