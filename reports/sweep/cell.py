"""One cell of a sweep: a workload under a scheduler with given limits, run, checked and measured.

A cell is plain data from end to end: its definition (:class:`Cell`) travels to a worker process
or a cluster's worker as it is, and its result (:class:`CellResult`) comes back and is stored as
JSON. :func:`run_cell` is the whole of a cell's work: a run judged through the judge's door
(:func:`kvsched.checks.judge.door.judged_run`: the stepped engine and the runtime monitor over
every iteration, as a check judges its fixed workloads), then the figures ``kvsched report``
shows (:func:`kvsched.reports.collect.case_of_run`: section 7's metrics and the efficiency
layer's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import msgspec

from kvsched.checks.judge.door import judged_run
from kvsched.reference import POLICIES
from kvsched.reference.engine_scheduler import CONFIGS, EngineScheduler
from kvsched.reference.families import workload_from_spec
from kvsched.reports.collect import case_of_run, declared_properties
from kvsched.reports.results import CaseResult, workload_content
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.strict_json import decode_json
from kvsched.spec.workload import Limits, Workload, WorkloadError, check_fits, parse_workload

from .hosted import BrokenHost, CellError, hosted

CELL_FORMAT = 1
"""Part of every cell's key: a change to what a cell's result holds makes every cell new."""
ENGINE_PREFIX = "engine:"
"""A scheduler named ``engine:NAME`` is the engine scheduler in configuration ``NAME``."""


class LimitsOverride(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Limits to replace in a workload; ``None`` keeps the workload's own."""

    batch_limit: int | None = None
    page_size: int | None = None
    pool_pages: int | None = None

    def apply(self, workload: Workload, label: str) -> Workload:
        """``workload`` under these limits; WorkloadError if a request can then never fit."""
        changed = {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}
        if not changed:
            return workload
        limits: Limits = replace(workload.limits, **changed)
        for index, request in enumerate(workload.requests):
            check_fits(request, limits, f"{label}: request #{index} ('{request.id}')")
        return replace(workload, limits=limits)

    def __str__(self) -> str:
        changed = msgspec.structs.asdict(self).items()
        return ", ".join(f"{k} {v}" for k, v in changed if v is not None) or "the workload's"


class Cell(msgspec.Struct, frozen=True):
    """What one run is: its scheduler, workload and limits."""

    scheduler: str
    """A reference policy (``static``), ``engine:NAME`` for an engine configuration, or the
    grid's name for a target."""
    workload: str
    """A workload file's path, or ``family:NAME:SIZE:SEED``."""
    digest: str
    """SHA-256 of the workload file's bytes; empty for a family, which its name fixes."""
    limits: LimitsOverride
    limits_key: str = ""
    """Where the limits are in the grid file (``limits[1]``), to name it in an error."""
    target: str = ""
    """A scheduler under test, ``/path/file.py:Class``; empty for kvsched's own schedulers."""
    target_digest: str = ""
    """:func:`.hosted.source_digest` of the target's files."""
    policy: str = ""
    """The policy the target is judged by; empty: the one it declares."""

    @property
    def key(self) -> str:
        """A stable name for the cell: the same definition gives the same key on any machine,
        in any order of the grid, so a finished cell is found again. A file is known by its
        bytes, not its path."""
        target = [self.target.rpartition(":")[2], self.target_digest, self.policy]
        workload = self.digest or self.workload
        identity = [CELL_FORMAT, self.scheduler, *target, workload, self.limits]
        return hashlib.sha256(msgspec.json.encode(identity)).hexdigest()[:20]

    @property
    def label(self) -> str:
        workload = self.workload if self.digest == "" else Path(self.workload).name
        limits = f" ({self.limits})" if self.limits_key else ""
        return f"{workload}{limits} / {self.scheduler}"


class CellResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A cell's verdict and figures, as stored under the sweep's folder and merged."""

    format: int
    key: str
    cell: Cell
    workload_name: str
    requests: int
    finding: str
    """The monitor's first finding (``PAGE-2 (iteration 7): ...``); empty when every applicable
    invariant held."""
    invariant: str
    problem: str
    """Why the figures are partial (a scheduler fault, a run that did not drain); else empty."""
    metrics: dict[str, int | float]
    """As the run gave them: counts are ints, so a stored cell reads back as it was written."""
    units: dict[str, str]
    limits: dict[str, int]
    content: str
    """A digest of the requests run (:func:`kvsched.reports.results.workload_content`)."""


@contextmanager
def scheduler_of(cell: Cell) -> Iterator[tuple[SchedulerFactory, str]]:
    """The factory a cell's scheduler stands for, and the policy its run is judged by."""
    if cell.target:
        with hosted(cell.target, cell.target_digest, cell.policy) as found:
            yield found
    elif cell.scheduler.startswith(ENGINE_PREFIX):
        config = CONFIGS[cell.scheduler.removeprefix(ENGINE_PREFIX)]
        yield EngineScheduler.configured(config), config.properties().policy
    else:
        yield POLICIES[cell.scheduler], cell.scheduler


def run_cell(cell: Cell) -> CellResult:
    """Run, check and measure one cell. CellError: its workload, limits or target is unusable."""
    try:
        workload = cell.limits.apply(_workload(cell), cell.limits_key or "limits")
    except WorkloadError as error:
        raise CellError(str(error)) from None
    try:
        with scheduler_of(cell) as (factory, policy):
            judged = judged_run(workload, factory, policy, declared_properties(factory))
            measured = case_of_run(workload, cell.scheduler, factory, judged.run)
    except BrokenHost as broken:
        return _result(cell, workload, "PROTO-1", f"PROTO-1 (end of run): {broken}", "", None)
    finding = judged.finding
    return _result(
        cell,
        workload,
        "" if finding is None else finding.invariant,
        "" if finding is None else str(finding),
        measured.problem,
        measured.result,
    )


def _result(
    cell: Cell,
    workload: Workload,
    invariant: str,
    finding: str,
    problem: str,
    case: CaseResult | None,
) -> CellResult:
    return CellResult(
        CELL_FORMAT,
        cell.key,
        cell,
        workload.name,
        len(workload.requests),
        finding,
        invariant,
        problem,
        {} if case is None else dict(case.metrics),
        {} if case is None else dict(case.units),
        {} if case is None else dict(case.limits),
        workload_content(workload.requests),
    )


def _workload(cell: Cell) -> Workload:
    if not cell.digest:
        return workload_from_spec(cell.workload)
    # A cluster's worker reads the file at the path the grid gave: the bytes it read must be
    # the ones the cell was keyed by, or its result would be stored under another file's key.
    try:
        data = Path(cell.workload).read_bytes()
    except OSError as error:
        message = f"{cell.workload}: cannot read the workload file ({error.strerror})"
        raise WorkloadError(message) from None
    if hashlib.sha256(data).hexdigest() != cell.digest:
        raise WorkloadError(
            f"{cell.workload}: the file changed since the grid was read (or differs on this "
            "worker): rerun the sweep to key its cells by the file as it is now"
        )
    return parse_workload(decode_json(data, cell.workload, WorkloadError), source=cell.workload)
