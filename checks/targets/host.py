"""The process a target runs in: ``python -m kvsched.checks.targets.host IN OUT MEMORY_MB CPU_S``.

kvsched starts this module in a fresh interpreter, in a session of its own, and talks to it over
the two pipe descriptors IN and OUT (:mod:`.wire`); the target's own stdout and stderr are other
pipes, read and capped by kvsched. Here, and only here, the target is imported and called. Every
call answers with plain data: the value, the exception the target raised (as text formatted here,
so an exception whose ``__str__`` loops hangs this process, not kvsched), or why the value cannot
be sent. Nothing this process says decides a verdict: kvsched checks every answer and judges it.
"""

from __future__ import annotations

import importlib
import os
import resource
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from kvsched.checks.targets import wire
from kvsched.checks.targets.learner import likely_cause
from kvsched.checks.targets.learner_state import readable_state
from kvsched.checks.targets.load import LearnerTarget, SchedulerTarget, TargetError, load_target
from kvsched.reference.tracebacks import user_frames
from kvsched.spec.properties import properties_to_json
from kvsched.spec.workload import Limits

_PARTS = msgspec.msgpack.Decoder(list[msgspec.Raw])
_PLAIN = msgspec.msgpack.Decoder(list[Any], ext_hook=wire.big_int)
_READ = wire.decoder(Any)  # as kvsched reads a learner's answer (remote.py, RemoteTarget._any)
_AHEAD = msgspec.msgpack.Decoder(list[list[dict[str, Any]]], ext_hook=wire.big_int)
_STOPPED = wire.encode(["stopped", None])


def main(argv: list[str]) -> None:
    fd_in, fd_out, memory_mb, cpu_seconds = (int(a) for a in argv)
    _confine(memory_mb, cpu_seconds)
    # Targets build on the reference (subclasses, the pool, the protocol's types): loading it
    # before the ready signal keeps kvsched's own import time out of the target's deadline, so a
    # busy machine cannot turn a correct target's import into a timeout.
    importlib.import_module("kvsched.reference")
    served = _Served(lambda frame: wire.write_frame(fd_out, frame))
    served.write(wire.encode(["ok", None]))  # ready: the target's time starts now
    while True:
        payload = wire.read_frame(fd_in)
        if payload is None:  # kvsched closed the pipe: the check is over
            break
        served.write(served.answer(payload))
    os._exit(0)  # threads the target started do not keep this process alive


def _confine(memory_mb: int, cpu_seconds: int) -> None:
    """Hard limits too, so the target cannot raise them again."""
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 64 * 1024 * 1024),
        (resource.RLIMIT_AS, memory_mb * 1024 * 1024),
    ]
    for kind, value in limits:
        resource.setrlimit(kind, (value, value))
    # Past the soft limit the kernel sends SIGXCPU, past the hard one SIGKILL.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 2))


class _Served:
    """The loaded target and the schedulers built from it, by the handle kvsched gave them."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self.write = write
        """Sends one frame to kvsched: the answers of a step run ahead go as each is made."""
        self.target: SchedulerTarget | LearnerTarget | None = None
        self.schedulers: dict[int, Any] = {}
        self.methods = wire.protocol_methods()
        # What a learner's last step answered in ``finished`` (:meth:`_step`), for the run kvsched
        # numbered ``held_key``: how many requests, and their items as sent.
        self.held_key = 0
        self.held_count = 0
        self.held_items = b""
        self.kept_all = False
        """Whether the last step's answer kept every finished request kvsched held unchanged."""

    def answer(self, payload: bytes) -> bytes:
        parts = _PARTS.decode(payload)
        op = msgspec.msgpack.decode(parts[0], type=str)
        if op == "load":
            return self._load(msgspec.msgpack.decode(parts[1], type=str))
        if op == "new":
            handle = msgspec.msgpack.decode(parts[1], type=int)
            limits = msgspec.msgpack.decode(parts[2], type=Limits)
            for gone in msgspec.msgpack.decode(parts[3], type=list[int]):
                self.schedulers.pop(gone, None)
            assert isinstance(self.target, SchedulerTarget)
            factory = self.target.factory
            return _reply(lambda: self.schedulers.__setitem__(handle, factory(limits)), None)
        if op == "call":
            handle = msgspec.msgpack.decode(parts[1], type=int)
            name = msgspec.msgpack.decode(parts[2], type=str)
            method = self.methods[name]
            bound = getattr(self.schedulers[handle], name)
            if method.argument is None:
                return _reply(bound, method.answer)
            argument = msgspec.msgpack.decode(parts[3], type=method.argument)
            return _reply(lambda: bound(argument), method.answer)
        if op == "step":
            return self._steps(parts)
        assert op == "fn" and isinstance(self.target, LearnerTarget)
        name = msgspec.msgpack.decode(parts[1], type=str)
        function = getattr(self.target.solution, name)
        if function is None:  # kvsched read it in the source: the module did not define it
            return wire.encode(["refused", f"{name} is not a function of the imported module"])
        arguments = msgspec.msgpack.decode(parts[2], type=list[Any], ext_hook=wire.big_int)
        return _reply(lambda: function(*arguments), Any, lambda: _learner_cause(name, arguments))

    def _steps(self, parts: list[msgspec.Raw]) -> bytes:
        """``["step", key, kept, [state, limits, policy], *ahead]``: :meth:`_step`, then with
        ``ahead`` (``[arrivals, total, most]``, remote.py ``RemoteTarget.step``) the run's next
        iterations, each answered in a frame of its own, written as soon as it is made.

        The state of each next iteration is the one kvsched would send: the state the learner
        returned, decoded from the frame just written as kvsched decodes it, its finished
        requests from the bytes held, ``iteration`` the next and the iteration's arrivals
        appended to ``waiting`` (learner.py, ``Ahead``). Where that cannot be made (the answer
        was not a readable state, or of more than ``most`` bytes, the bound kvsched held the
        first answer to) or the run has drained (as many finished as ``total``), the last frame
        is ``stopped`` and kvsched asks again, sending the state. Running ahead does
        not decide what is judged: kvsched reads each frame as the answer to the state it holds.
        """
        assert isinstance(self.target, LearnerTarget)
        function = self.target.solution.schedule_iteration
        if function is None:  # kvsched read it in the source: the module did not define it
            return wire.encode(["refused", "schedule_iteration is not a function of the module"])
        key = msgspec.msgpack.decode(parts[1], type=int)
        kept = msgspec.msgpack.decode(parts[2], type=int)
        arguments = _PLAIN.decode(parts[3])
        ahead = _AHEAD.decode(parts[4]) if len(parts) > 6 else []
        total, most = (msgspec.msgpack.decode(p, type=int) for p in parts[5:7]) if ahead else (0, 0)
        if key != self.held_key:
            self.held_key, self.held_count, self.held_items = key, 0, b""
        held = self.held_count
        given = arguments[0] if arguments else None
        if kept not in (0, held) or not isinstance(given, dict):
            self.held_count, self.held_items = 0, b""
            return wire.encode(["refused", f"a step keeping {kept} of {held} requests"])
        iteration = given.get("iteration")
        if kept:
            # Fresh objects each step, decoded in C from the bytes kvsched read them from.
            given["finished"] = _PLAIN.decode(wire.array(kept, self.held_items)) + given["finished"]
        rest = wire.encode(arguments[1:])[4:] if ahead else b""  # fresh limits each iteration
        for arrivals in ahead:
            frame = self._step(function, arguments, kept)
            state = self._next(frame, total) if len(frame) <= most else None
            if state is None or type(iteration) is not int:
                return frame if not _answered(frame) else self._last(frame)
            self.write(frame)
            iteration += 1
            state["iteration"] = iteration
            state["waiting"].extend(arrivals)
            kept = self.held_count
            arguments = [state, *_PLAIN.decode(rest)]
        return self._step(function, arguments, kept)

    def _last(self, frame: bytes) -> bytes:
        """``frame``, answered, then ``stopped``: the host runs no further ahead."""
        self.write(frame)
        return _STOPPED

    def _next(self, frame: bytes, total: int) -> dict[str, Any] | None:
        """The state kvsched builds from ``frame``, before the next iteration's changes; None
        where kvsched would not run on (an answer not readable as a state) or the run drained."""
        if not _answered(frame) or not self.kept_all:
            return None  # changed finished requests: kvsched may refuse them (learner._decision)
        try:
            state = readable_state(_READ(wire.split_step(wire.split_reply(frame[4:])[1])[1]), True)
        except Exception:  # not a state kvsched reads on: it judges the frame, then stops
            return None
        if self.held_count >= total:
            return None
        state["finished"] = _PLAIN.decode(wire.array(self.held_count, self.held_items))
        return state

    def _step(self, function: Callable[..., Any], arguments: list[Any], kept: int) -> bytes:
        """One ``schedule_iteration`` of a run, its state's finished requests sent as a delta.

        ``finished`` only grows, and sending it whole each way every iteration made a learner's
        check cost the square of its run. kvsched sends the requests past the first ``kept``,
        which this process holds from its last answer for the same run; the learner gets them
        all, as fresh copies. The answer is ``[kept, state]``: the returned ``finished`` less its
        first ``kept`` requests, sent only if they encode to the very bytes of the ones held
        (else ``kept`` is 0 and all are sent), so kvsched reads every byte it did not already
        hold, and judges it as if the whole state had crossed.
        """
        held_items = self.held_items
        self.held_count, self.held_items = 0, b""  # until this step's answer is sent
        pending: list[Any] = []

        def delta(state: Any) -> list[Any]:
            """``[kept, state]``, ``state``'s finished requests less those kvsched holds."""
            if type(state) is not dict or type(state.get("finished")) is not list:
                return [0, state]
            finished = state["finished"]
            returned = wire.items(wire.encode(finished)[4:])  # TypeError ...: not plain data
            same = kept if kept and returned.startswith(held_items) else 0
            pending.append((returned, len(finished), same == kept))
            return [same, {**state, "finished": finished[same:]}]

        frame = _reply(
            lambda: function(*arguments),
            Any,
            lambda: _learner_cause("schedule_iteration", arguments),
            delta,
        )
        if pending and _answered(frame):
            self.held_items, self.held_count, self.kept_all = pending[0]
        return frame

    def _load(self, spec: str) -> bytes:
        try:
            target = load_target(spec)
        except TargetError as error:
            return wire.encode(["refused", wire.cut(_text(error))])
        except BaseException as error:  # the target's import raised what load_target lets pass
            return wire.encode(["refused", wire.cut(f"importing {spec} raised {_name(error)}")])
        if not isinstance(target, SchedulerTarget | LearnerTarget):
            return wire.encode(["refused", f"{spec}: an event log is checked without a host"])
        self.target = target
        if isinstance(target, SchedulerTarget):
            properties = target.properties
            description = wire.Description(
                "scheduler",
                target.policy,  # type: ignore[arg-type]  # kvsched checks it on arrival
                properties_to_json(properties) if properties is not None else None,
            )
        else:
            description = wire.Description("learner", "", None)
        return wire.encode(["ok", description])


def _reply(
    call: Callable[[], Any],
    answer: Any,
    cause: Callable[[], str] = str,
    sent: Callable[[Any], Any] = lambda value: value,
) -> bytes:
    """The frame answering one call into the target: its value, its exception or its exit.

    An exception's text carries, on lines of their own, what ``cause`` finds that led to it and
    the target's own frames (file, line, function), which only this process can see. ``sent``
    makes what is sent of the value.
    """
    try:
        value = call()
    except SystemExit as exit_:
        return wire.encode(["exited", wire.cut(f"sys.exit({_text(exit_.code)})")])
    except BaseException as error:
        frames = wire.cut(_frames(error))
        text = "\n".join(x for x in (_text(error), cause()) if x)
        raised = wire.Raised(_name(error), _builtin(error), wire.cut(text), frames)
        return wire.encode(["raised", raised])
    if answer is None or answer is type(None):
        value = None  # the protocol ignores what add_request returns
    elif answer is not Any and isinstance(answer, type) and not isinstance(value, answer):
        return wire.encode(["unsendable", f"a {_name(value)}, not a {answer.__name__}"])
    try:
        return wire.encode(["ok", sent(value)])
    except (TypeError, ValueError, OverflowError, RecursionError) as error:  # too deep: msgspec
        return wire.encode(
            ["unsendable", wire.cut(f"a {_name(value)} that is not plain data: {error}")]
        )


def _answered(frame: bytes) -> bool:
    """Whether ``frame`` answers ``ok``: any other status ends what kvsched judges of the run."""
    return wire.split_reply(frame[4:])[0] == "ok"


def _learner_cause(name: str, arguments: list[Any]) -> str:
    """The likely cause of a learner's crash, read off the state it changed before raising."""
    if name != "schedule_iteration" or len(arguments) < 2 or not isinstance(arguments[1], dict):
        return ""
    limits = arguments[1]
    try:
        return likely_cause(arguments[0], int(limits["page_size"]), int(limits["pool_pages"]))
    except Exception:  # the learner's state may hold anything; the cause is only a hint
        return ""


def _frames(error: BaseException) -> str:
    try:
        return user_frames(error)
    except BaseException:  # a traceback whose source cannot be read is shown without frames
        return ""


def _text(value: Any) -> str:
    try:
        return str(value)
    except BaseException:  # the target's __str__ may raise anything
        return f"<{_name(value)} whose text cannot be formatted>"


def _name(value: Any) -> str:
    name = type(value).__name__
    return name if isinstance(name, str) else "object"


def _builtin(error: BaseException) -> str:
    for kind in type(error).__mro__:
        if kind.__module__ == "builtins":
            return kind.__name__
    return "BaseException"


if __name__ == "__main__":
    main(sys.argv[1:])
