"""The pytest plugin: ``pytest --kvsched-target=pkg.mod:Sched`` checks a scheduler in any suite.

Installed with kvsched (entry point ``pytest11``), it does nothing unless ``--kvsched-target`` is
given. Then every target (the option may repeat; any form ``kvsched check`` takes) becomes one
test per invariant and policy, named like ``kvsched[pkg.mod:Sched][continuous][PAGE-2]`` under
the target's path (``pkg/mod.py::kvsched[...]``, or the file or log it names): an
invariant that holds passes, a violation fails with the explanation ``kvsched check`` prints (the
smallest workload, the last iterations), and an invariant that does not apply to the policy is
skipped. The target comes in through the judge's door (:class:`~kvsched.checks.judge.door.Door`),
as in ``kvsched check``: its kind is read once, it is loaded once, at collection (its declared
policy names the tests), and that same load is checked once, before the tests run (its time is
the ``kvsched_check_seconds`` property of its first test, in JUnit too): in a process of its
own, under the per-call timeout and the overall budget, so a hanging or exiting scheduler fails
its tests instead of hanging or ending the suite.

Options: ``--kvsched-workload FILE``, ``--kvsched-policy static|continuous``,
``--kvsched-profile ci|dev|thorough`` (Hypothesis), ``--kvsched-timeout SECONDS``,
``--kvsched-budget SECONDS``, ``--kvsched-save-dir DIR`` (failing workloads; by default in
kvsched's cache folder, never the folder pytest runs in), and ``--kvsched-in-process`` to import
and call the target in the test process itself (the user's own code, for a debugger; still under
the per-call deadline, which an alarm enforces there and code that ignores it can dodge).

Test names and failure texts carry the target's words (its file's name, an exception's text, a
log's ids): they are :func:`~kvsched.spec.text.escaped`, names on one line, before pytest shows
them, as ``kvsched check`` shows them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.text import escaped, one_line
from kvsched.spec.vocabulary import DEFAULT_PROFILE, POLICY_NAMES, PROFILE_NAMES

_REPORTS = pytest.StashKey[dict[str, Any]]()
_DOORS = pytest.StashKey[dict[str, Any]]()
"""Each target's :class:`~kvsched.checks.judge.door.Door`, loaded at collection, closed once
checked or when the session ends."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvsched", "kvsched: check a scheduler against the invariants")
    group.addoption(
        "--kvsched-target",
        action="append",
        default=[],
        metavar="TARGET",
        help="check this scheduler (pkg.mod:Class, file.py:Class, solution.py or log.jsonl); "
        "may repeat",
    )
    group.addoption("--kvsched-workload", metavar="FILE", help="also replay this workload first")
    group.addoption("--kvsched-policy", choices=POLICY_NAMES, default="")
    group.addoption("--kvsched-profile", choices=PROFILE_NAMES, default=DEFAULT_PROFILE)
    group.addoption("--kvsched-timeout", type=float, default=10.0, metavar="SECONDS")
    group.addoption("--kvsched-budget", type=float, default=600.0, metavar="SECONDS")
    group.addoption(
        "--kvsched-save-dir",
        metavar="DIR",
        help="where failing workloads are saved (default: counterexamples/ in kvsched's cache "
        "folder, as for kvsched check; each failure names its file)",
    )
    group.addoption(
        "--kvsched-in-process",
        action="store_true",
        help="import and call the target in this process (trusted code only)",
    )


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    targets: list[str] = config.getoption("kvsched_target")
    if not targets:
        return
    config.stash[_REPORTS] = {}
    config.stash[_DOORS] = {}
    for target in targets:
        items.extend(_items_for(session, target))


def pytest_sessionfinish(session: pytest.Session) -> None:
    for door in session.config.stash.get(_DOORS, {}).values():
        door.close()  # a target whose tests were all deselected was loaded, never checked


def _items_for(session: pytest.Session, target: str) -> list[pytest.Item]:
    config = session.config
    doors = config.stash[_DOORS]
    door = doors[target] = doors.get(target) or _door(config, target)  # a repeated one: once
    path = _where(config, target, door.kind)
    try:
        where = str(path.relative_to(config.rootpath))
    except ValueError:  # outside the root: a relative path still, as pytest writes one
        where = os.path.relpath(path, config.rootpath)
    parent = KvschedTarget.from_parent(session, path=path, nodeid=one_line(where), target=target)
    try:
        loaded = _loaded(config, door)
    except _Unloadable as error:
        return [
            KvschedItem.from_parent(
                parent,
                name=f"kvsched[{one_line(target)}]",
                target=target,
                policy="",
                invariant="",
                load_error=str(error),
            )
        ]
    chosen = config.getoption("kvsched_policy")
    if door.kind == "learner":
        policies: tuple[str, ...] = (chosen,) if chosen else POLICY_NAMES
        invariants = ["allocate_kv_pages", *(i.id for i in CATALOGUE)]
    else:
        policy = chosen or getattr(loaded, "policy", "")  # a scheduler's declared one
        policies = (policy,)
        invariants = [i.id for i in CATALOGUE]
    items: list[pytest.Item] = []
    for policy in policies:
        for invariant in invariants:
            if invariant == "allocate_kv_pages" and policy != policies[0]:
                continue
            label = f"kvsched[{one_line(target)}][{policy or 'declared'}][{invariant}]"
            items.append(KvschedItem.from_parent(
                parent, name=label, target=target, policy=policy, invariant=invariant
            ))  # fmt: skip
    return items


def _where(config: pytest.Config, target: str, kind: str) -> Path:
    """The file a target's tests sit under, found without importing anything of the target's:
    the solution, class file or log it names, or for ``pkg.mod:Class`` the module's path below
    its import root (``pkg/mod.py``), so node ids and JUnit class names read as a path."""
    if target == "-":
        return config.rootpath / "stdin"
    if kind == "event log":
        return Path(target).absolute()
    name = target.partition(":")[0] if ".py:" in target else target
    if name.endswith(".py"):
        return Path(name).absolute()
    module = target.partition(":")[0]
    return config.rootpath / (module.replace(".", "/") + ".py")


class KvschedTarget(pytest.File):
    """The node a target's tests hang from, named by :func:`_where`'s path."""

    def __init__(self, *, target: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target

    def collect(self) -> list[pytest.Item]:  # its items are made by the hook above
        return []


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Check each target whose tests were selected before any test runs, so that the check's
    time is booked to no single invariant (JUnit would give it all to the first); it is stated
    instead as the ``kvsched_check_seconds`` property of the target's first test."""
    if _REPORTS not in session.config.stash or session.config.option.collectonly:
        return
    first: dict[str, KvschedItem] = {}
    for item in session.items:
        if isinstance(item, KvschedItem) and not item.load_error:
            first.setdefault(item.target, item)
    for item in first.values():
        started = time.monotonic()
        try:
            item.checked()
        except Exception:  # raised again, with its traceback, by the first test that needs it
            continue
        item.user_properties.append(("kvsched_check_seconds", round(time.monotonic() - started, 3)))


class KvschedItem(pytest.Item):
    """One invariant of one target under one policy."""

    def __init__(
        self, *, target: str, policy: str, invariant: str, load_error: str = "", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.policy = policy
        self.invariant = invariant
        self.load_error = load_error

    def runtest(self) -> None:
        from kvsched.checks.verdict.render import explain
        from kvsched.checks.verdict.report import (
            INCONCLUSIVE,
            NOT_APPLICABLE,
            NOT_CHECKED,
            VIOLATED,
        )

        if self.load_error:
            raise KvschedFailure(f"cannot load the target: {self.load_error}")
        report = self.checked()
        if report.outcome == INCONCLUSIVE:  # too little evidence passes no test
            raise KvschedFailure("INCONCLUSIVE: " + "; ".join(report.reasons))
        if self.invariant == "allocate_kv_pages":
            finding = report.allocator.finding if report.allocator else None
            if finding is not None:
                raise KvschedFailure(f"{finding.invariant}: {finding.message}")
            return
        for verdict in report.verdicts:
            if self.policy and verdict.policy != self.policy:
                continue
            row = next(r for r in verdict.invariants if r.invariant == self.invariant)
            if row.status == VIOLATED:
                if verdict.finding is None or verdict.finding.invariant != row.invariant:
                    finding = verdict.finding_for(row.invariant)
                    assert finding is not None
                    raise KvschedFailure(f"allocate_kv_pages: {finding.message}")
                raise KvschedFailure(explain(verdict, f"kvsched check {self.target}").strip())
            if row.status in (NOT_APPLICABLE, NOT_CHECKED):
                pytest.skip(f"{row.status}: {row.how}")
            return
        if self.invariant != "allocate_kv_pages":
            judged = ", ".join(v.policy or "declared" for v in report.verdicts) or "none"
            raise KvschedFailure(
                f"not judged: the check has no verdict under {self.policy or 'the declared'} "
                f"policy (verdicts: {judged})"
            )

    def checked(self) -> Any:
        from kvsched.checks.judge.hosted import judge
        from kvsched.checks.search.runs import cache_folder
        from kvsched.checks.verdict.files import save_failing_workloads

        reports = self.config.stash[_REPORTS]
        key = self.target
        if key not in reports:
            try:
                with self.config.stash[_DOORS][key] as door:  # the one loaded at collection
                    report = judge(door, _options(self.config, with_workload=True))
                chosen = self.config.getoption("kvsched_save_dir")
                save_dir = Path(chosen) if chosen else cache_folder() / "counterexamples"
                reports[key] = save_failing_workloads(report, save_dir)
            except Exception as error:  # its host is closed: every test of it shows this
                reports[key] = error
        found = reports[key]
        if isinstance(found, Exception):
            raise found
        return found

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, KvschedFailure):
            return escaped(str(excinfo.value))
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class KvschedFailure(Exception):
    """A violated invariant; pytest shows its message without a traceback."""


@pytest.fixture
def kvsched_check() -> Any:
    """``kvsched_check("pkg.mod:Sched", policy="continuous")`` returns the check's Report.

    For projects that prefer their own assertions: ``assert kvsched_check(TARGET).ok``.
    """
    from kvsched.checks.judge.hosted import check_hosted
    from kvsched.checks.judge.target import CheckOptions
    from kvsched.checks.targets.confinement import Confinement

    def check(target: str, **options: Any) -> Any:
        timeout = options.get("timeout", CheckOptions.timeout)
        return check_hosted(target, CheckOptions(**options), Confinement(call_seconds=timeout))

    return check


class _Unloadable(Exception):
    """The target cannot be loaded, or broke down while it was."""


def _door(config: pytest.Config, target: str) -> Any:
    """The judge's door for ``target``, its kind read; hosted unless ``--kvsched-in-process``."""
    from kvsched.checks.judge.door import Door

    in_process = config.getoption("kvsched_in_process")
    confinement = None if in_process else _confinement(config)
    return Door(target, confinement)


def _loaded(config: pytest.Config, door: Any) -> Any:
    """The target at ``door``, loaded once, in its host (or in this process under the deadline)."""
    from kvsched.checks.judge.door import UNLOADABLE

    try:
        return door.load(_options(config, with_workload=False))
    except UNLOADABLE as error:
        door.close()
        raise _Unloadable(str(error)) from None


def _options(config: pytest.Config, with_workload: bool) -> Any:
    """The check's options; the workload file is read only for the check itself, not for the
    load, which needs only to know what the check will import."""
    from kvsched.checks.judge.options import CheckOptions
    from kvsched.spec.workload import load_workload

    workload_file = config.getoption("kvsched_workload") if with_workload else None
    return CheckOptions(
        workload=load_workload(Path(workload_file)) if workload_file else None,
        policy=config.getoption("kvsched_policy"),
        profile=config.getoption("kvsched_profile"),
        timeout=config.getoption("kvsched_timeout"),
    )


def _confinement(config: pytest.Config) -> Any:
    from kvsched.checks.targets.confinement import Confinement

    return Confinement(
        call_seconds=config.getoption("kvsched_timeout"),
        budget_seconds=config.getoption("kvsched_budget"),
    )
