"""The pytest plugin: ``pytest --kvsched-target=pkg.mod:Sched`` checks a scheduler in any suite.

Installed with kvsched (entry point ``pytest11``), it does nothing unless ``--kvsched-target`` is
given. Then every target (the option may repeat; any form ``kvsched check`` takes) becomes one
test per invariant and policy, named like ``kvsched[pkg.mod:Sched][continuous][PAGE-2]``: an
invariant that holds passes, a violation fails with the explanation ``kvsched check`` prints (the
smallest workload, the last iterations), and an invariant that does not apply to the policy is
skipped. The target is checked once, on its first test, the way ``kvsched check`` checks it: in
a process of its own, under the per-call timeout and the overall budget, so a hanging or exiting
scheduler fails its tests instead of hanging or ending the suite.

Options: ``--kvsched-workload FILE``, ``--kvsched-policy static|continuous``,
``--kvsched-profile ci|dev|thorough`` (Hypothesis), ``--kvsched-timeout SECONDS``,
``--kvsched-budget SECONDS``, ``--kvsched-save-dir DIR`` (failing workloads; by default in
kvsched's cache folder, never the folder pytest runs in), and ``--kvsched-in-process`` to import
and call the target in the test process itself (the user's own code, for a debugger; still under
the per-call deadline, which an alarm enforces there and code that ignores it can dodge).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvsched.spec.invariants import CATALOGUE
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
    try:
        loaded = _load(config, target)
    except _Unloadable as error:
        return [
            KvschedItem.from_parent(
                session,
                name=f"kvsched[{target}]",
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
            label = f"kvsched[{target}][{policy or 'declared'}][{invariant}]"
            items.append(KvschedItem.from_parent(
                session, name=label, target=target, policy=policy, invariant=invariant
            ))  # fmt: skip
    return items


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
        from kvsched.checks.verdict.report import NOT_APPLICABLE, NOT_CHECKED, VIOLATED

        if self.load_error:
            raise KvschedFailure(f"cannot load the target: {self.load_error}")
        report = self._report()
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

    def _report(self) -> Any:
        from kvsched.checks.judge.check import CheckOptions, check_target
        from kvsched.checks.judge.hosted import check_hosted
        from kvsched.checks.search.profiles import cache_folder
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
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.target, None, self.name


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
