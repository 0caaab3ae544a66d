"""The pytest plugin: ``pytest --kvsched-target=pkg.mod:Sched`` checks a scheduler in any suite.

Installed with kvsched (entry point ``pytest11``), it does nothing unless ``--kvsched-target`` is
given. Then every target (the option may repeat; any form ``kvsched check`` takes) becomes one
test per invariant and policy, named like ``kvsched[pkg.mod:Sched][continuous][PAGE-2]`` under
the target's path (``pkg/mod.py::kvsched[...]``, or the file or log it names): an
invariant that holds passes, a violation fails with the explanation ``kvsched check`` prints (the
smallest workload, the last iterations), and an invariant that does not apply to the policy is
skipped. The target is checked once, before the tests run (its time is the
``kvsched_check_seconds`` property of its first test, in JUnit too), the way ``kvsched check``
checks it: in a process of its own, under the per-call timeout and the overall budget, so a
hanging or exiting scheduler fails its tests instead of hanging or ending the suite.

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
    for target in targets:
        items.extend(_items_for(session, target))


def _items_for(session: pytest.Session, target: str) -> list[pytest.Item]:
    from kvsched.checks.targets.load import LearnerTarget, SchedulerTarget

    config = session.config
    path = _where(config, target)
    try:
        where = str(path.relative_to(config.rootpath))
    except ValueError:  # outside the root: a relative path still, as pytest writes one
        where = os.path.relpath(path, config.rootpath)
    parent = KvschedTarget.from_parent(session, path=path, nodeid=one_line(where), target=target)
    try:
        loaded = _load(config, target)
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
    if isinstance(loaded, LearnerTarget):
        policies: tuple[str, ...] = (chosen,) if chosen else POLICY_NAMES
        invariants = ["allocate_kv_pages", *(i.id for i in CATALOGUE)]
    else:
        policy = chosen or (loaded.policy if isinstance(loaded, SchedulerTarget) else "")
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


def _where(config: pytest.Config, target: str) -> Path:
    """The file a target's tests sit under, found without importing anything of the target's:
    the solution, class file or log it names, or for ``pkg.mod:Class`` the module's path below
    its import root (``pkg/mod.py``), so node ids and JUnit class names read as a path."""
    from kvsched.checks.targets.load import is_event_log

    if target == "-":
        return config.rootpath / "stdin"
    if is_event_log(target):
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
        from kvsched.checks.judge.check import CheckOptions, check_target
        from kvsched.checks.judge.hosted import check_hosted
        from kvsched.checks.search.runs import cache_folder
        from kvsched.checks.verdict.files import save_failing_workloads
        from kvsched.spec.workload import load_workload

        reports = self.config.stash[_REPORTS]
        key = self.target
        if key not in reports:
            workload_file = self.config.getoption("kvsched_workload")
            options = CheckOptions(
                workload=load_workload(Path(workload_file)) if workload_file else None,
                policy=self.config.getoption("kvsched_policy"),
                profile=self.config.getoption("kvsched_profile"),
                timeout=self.config.getoption("kvsched_timeout"),
            )
            if self.config.getoption("kvsched_in_process"):
                report = check_target(_load(self.config, self.target), options)
            else:
                report = check_hosted(self.target, options, _confinement(self.config))
            chosen = self.config.getoption("kvsched_save_dir")
            save_dir = Path(chosen) if chosen else cache_folder() / "counterexamples"
            reports[key] = save_failing_workloads(report, save_dir)
        return reports[key]

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
    from kvsched.checks.judge.check import CheckOptions
    from kvsched.checks.judge.hosted import check_hosted
    from kvsched.checks.targets.confinement import Confinement

    def check(target: str, **options: Any) -> Any:
        timeout = options.get("timeout", CheckOptions.timeout)
        return check_hosted(target, CheckOptions(**options), Confinement(call_seconds=timeout))

    return check


class _Unloadable(Exception):
    """The target cannot be loaded, or broke down while it was."""


def _load(config: pytest.Config, target: str) -> Any:
    """The target, loaded in this process under the deadline or described by its host."""
    from kvsched.checks.targets.deadline import CallTimeout, Deadline, TargetExit
    from kvsched.checks.targets.load import TargetError, is_event_log, load_target
    from kvsched.checks.targets.process import HostFailure
    from kvsched.checks.targets.remote import RemoteTarget

    try:
        if config.getoption("kvsched_in_process"):
            deadline = Deadline(config.getoption("kvsched_timeout"))
            return deadline.call(f"importing {target}", load_target, target)
        if is_event_log(target):
            return load_target(target)
        remote = RemoteTarget(target, _confinement(config))
        try:  # only what the target is and declares: the check starts a host of its own
            return remote.load()
        finally:
            remote.close()
    except (TargetError, CallTimeout, TargetExit, HostFailure) as error:
        raise _Unloadable(str(error)) from None


def _confinement(config: pytest.Config) -> Any:
    from kvsched.checks.targets.confinement import Confinement

    return Confinement(
        call_seconds=config.getoption("kvsched_timeout"),
        budget_seconds=config.getoption("kvsched_budget"),
    )
