"""Loading what ``kvsched check`` judges: a scheduler class, a learner's file, or an event log.

The forms of TARGET:

- ``package.module:Class`` or ``path/to/file.py:Class``: a scheduler implementing the protocol
  (spec/protocol.py); ``Class(limits)`` builds it. It may declare ``policy = "static"`` or
  ``"continuous"`` and ``properties`` (a :class:`~kvsched.spec.properties.TargetProperties`).
  ``Class`` may also be any callable taking :class:`~kvsched.spec.workload.Limits`.
- ``path/to/solution.py`` (or ``package.module``) with no ``:Class``: a learner's solution
  exposing ``allocate_kv_pages`` and ``schedule_iteration`` (spec/learner.md).
- ``path/to/run.jsonl`` (or ``.jsonl.gz``): a recorded event log, checked offline; or ``-``, a
  log on standard input, checked as it comes (a named pipe or a shell's ``<(...)`` too).

Anything that cannot be loaded raises :class:`TargetError` with what is missing and how to fix
it; ``kvsched check`` prints it and exits 2. Importing runs the target's module-level code, so
an exception there is reported as the target's, with its file and line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import stat
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from kvsched.checks.targets.deadline import DeadlineExpired
from kvsched.checks.targets.learner import (
    LEARNER_FUNCTIONS,
    LearnerSolution,
    solution_from_namespace,
)
from kvsched.spec.properties import TargetProperties
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.vocabulary import POLICY_NAMES

PROTOCOL_METHODS = ("add_request", "schedule", "update_from_output")


class TargetError(Exception):
    """The target cannot be loaded or does not implement what its form promises."""


@dataclass(frozen=True)
class SchedulerTarget:
    spec: str
    factory: SchedulerFactory
    policy: str
    """The policy the target declares ("" if none); ``--policy`` overrides it."""
    properties: TargetProperties | None


@dataclass(frozen=True)
class LearnerTarget:
    spec: str
    solution: LearnerSolution


@dataclass(frozen=True)
class EventLogTarget:
    spec: str
    path: Path


Target = SchedulerTarget | LearnerTarget | EventLogTarget

Kind = Literal["scheduler", "learner", "event log"]
"""What a TARGET is; :func:`target_kind` decides it, once, and every door uses that answer."""


STDIN = "-"
"""TARGET for an event log on standard input: an engine's output piped in as it runs."""


def is_event_log(spec: str) -> bool:
    """Whether TARGET names a recorded event log (``.jsonl``, or gzipped ``.jsonl.gz``), or
    one that comes down a pipe: standard input (``-``), a named pipe or a shell's ``<(...)``."""
    return spec == STDIN or spec.endswith((".jsonl", ".jsonl.gz")) or _is_pipe(spec)


def _is_pipe(spec: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(spec).st_mode)
    except (OSError, ValueError):  # no such file, or not a path at all
        return False


def target_kind(spec: str) -> Kind:
    """The kind TARGET names by its form alone (this module's docstring): the one place it is
    decided. Nothing the target's code does can change it, so it is read before anything runs."""
    if is_event_log(spec):
        return "event log"
    _, colon, attribute = spec.rpartition(":")
    if colon and attribute and attribute not in LEARNER_FUNCTIONS:
        return "scheduler"
    return "learner"


def load_target(spec: str, kind: Kind | None = None) -> Target:
    """Load TARGET, in one of the forms of this module's docstring, as the ``kind`` it names
    (:func:`target_kind`'s answer, read here when not given)."""
    if not spec:
        raise TargetError(
            "empty target; give package.module:Class, file.py:Class, file.py or a .jsonl log"
        )
    kind = kind or target_kind(spec)
    if kind == "event log":
        return EventLogTarget(spec, _log_path(spec))
    where, _, attribute = spec.rpartition(":") if ":" in spec else (spec, "", "")
    module = _import(where)
    found = _attribute(spec, module, attribute) if attribute else module
    if kind == "scheduler":
        return _scheduler_target(spec, found, attribute)
    solution = solution_from_namespace(spec, module)
    if solution is None:
        raise TargetError(_no_learner_functions(spec, module))
    return LearnerTarget(spec, solution)


def _log_path(spec: str) -> Path:
    """Where the event log TARGET is read from."""
    if spec != STDIN:
        path = Path(spec)
        if not (path.is_file() or _is_pipe(spec)):
            raise TargetError(f"event log {spec}: no such file")
        return path
    if sys.stdin is None or sys.stdin.isatty():
        what = "closed" if sys.stdin is None else "a terminal"
        raise TargetError(
            f"event log -: standard input is {what}; pipe a log in, as "
            "`kvsched check - < run.jsonl` or an engine's output, `ENGINE | kvsched check -`"
        )
    return Path("/dev/stdin")


def _attribute(spec: str, module: ModuleType, attribute: str) -> Any:
    """What ``module:attribute`` names; TargetError, naming the classes there, if nothing."""
    obj: Any = module
    where = spec.rpartition(":")[0]
    for part in attribute.split("."):
        if not hasattr(obj, part):
            found = ", ".join(_scheduler_classes(module)) or "none"
            raise TargetError(
                f"{spec}: {where} has no attribute '{attribute}' "
                f"(scheduler classes defined there: {found})"
            )
        obj = getattr(obj, part)
    return obj


def _scheduler_target(spec: str, obj: Any, attribute: str) -> SchedulerTarget:
    if inspect.isclass(obj):
        missing = [m for m in PROTOCOL_METHODS if not callable(getattr(obj, m, None))]
        if missing:
            raise TargetError(
                f"{spec}: {obj.__name__} does not implement the scheduler protocol: it has no "
                f"{', '.join(m + '()' for m in missing)}. A scheduler needs add_request(request), "
                "schedule() -> ScheduledBatch and update_from_output(output) -> StepOutcome "
                "(spec/protocol.py), and is built as Class(limits)."
            )
    elif not callable(obj):
        raise TargetError(
            f"{spec}: '{attribute}' is a {type(obj).__name__}, not a scheduler class or a "
            "callable that builds one from Limits"
        )
    policy = getattr(obj, "policy", "")
    if type(policy) is not str or policy not in ("", *POLICY_NAMES):
        # The policy names files and picks invariants: only the known names are declarations.
        raise TargetError(
            f"{spec}: declares policy {_shown(policy)}; a declared policy is one of "
            f"{', '.join(POLICY_NAMES)} (or leave it out and pass --policy)"
        )
    properties = getattr(obj, "properties", None)
    if properties is not None and not isinstance(properties, TargetProperties):
        raise TargetError(
            f"{spec}: 'properties' must be a kvsched.spec.properties.TargetProperties, got "
            f"{type(properties).__name__}"
        )
    if properties is not None and properties.policy:
        if policy and policy != properties.policy:
            raise TargetError(
                f"{spec}: declares policy {policy!r} but its properties say "
                f"{properties.policy!r}; declare one"
            )
        policy = properties.policy
        if policy not in POLICY_NAMES:
            raise TargetError(
                f"{spec}: its properties declare policy {_shown(policy)}; a declared policy is "
                f"one of {', '.join(POLICY_NAMES)}"
            )
    return SchedulerTarget(spec, obj, policy, properties)


def _import(where: str) -> ModuleType:
    """Import a module by file path (``x/y.py``) or dotted name; failures are the target's."""
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise TargetError(f"{where}: no such file")
        if path.suffix != ".py":
            raise TargetError(
                f"{where}: not a Python file (.py) or an event log (.jsonl); give "
                "package.module:Class, path/to/file.py:Class, path/to/solution.py or "
                "path/to/run.jsonl"
            )
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        name = f"kvsched_target_{path.stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise TargetError(f"{where}: cannot be imported as Python source")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            module_spec.loader.exec_module(module)
        except (KeyboardInterrupt, DeadlineExpired):
            raise
        except BaseException as error:
            del sys.modules[name]
            raise TargetError(_import_failure(where, error)) from None
        return module
    if not all(part.isidentifier() for part in where.split(".")):
        raise TargetError(
            f"{where}: not a module name, a .py file or a .jsonl log; give package.module:Class, "
            "path/to/file.py:Class, path/to/solution.py or path/to/run.jsonl"
        )
    # Like ``python -m``: modules of the directory kvsched is run from are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(where)
    except (KeyboardInterrupt, DeadlineExpired):
        raise
    except BaseException as error:
        raise TargetError(_import_failure(where, error)) from None


def _shown(value: Any) -> str:
    if type(value) is str:
        return repr(value[:60])
    return f"of type {type(value).__name__}"


def _import_failure(where: str, error: BaseException) -> str:
    if isinstance(error, SyntaxError):
        return f"{error.filename}:{error.lineno}: syntax error in the target: {error.msg}"
    if isinstance(error, ModuleNotFoundError) and error.name and where.startswith(error.name):
        return (
            f"{where}: no module named '{error.name}' (run kvsched from the directory that "
            "contains the package, or install it)"
        )
    frames = traceback.extract_tb(error.__traceback__)
    origin = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"importing {where} raised {type(error).__name__}: {error}{origin}"


def _scheduler_classes(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and all(callable(getattr(value, m, None)) for m in PROTOCOL_METHODS)
    )


def neither_function(spec: str) -> str:
    """Why a learner's file ``spec`` is refused when it defines neither function."""
    return (
        f"{spec} defines neither allocate_kv_pages nor schedule_iteration, the functions of the "
        "learner's exercise (spec/learner.md)"
    )


def _no_learner_functions(spec: str, module: ModuleType) -> str:
    message = neither_function(spec)
    classes = _scheduler_classes(module)
    if classes:
        message += f"; to check a scheduler class, name it: {spec}:{classes[0]}"
    return message
