"""A sweep's grid file (TOML): the schedulers, workloads, seeds and limits whose product it runs.

The file is read whole before anything runs, so a misspelt key or a family that does not exist
stops the sweep with the file, the key and what is wrong (exit 2), not after an hour of cells.
Keys (docs/sweeps.md):

- ``policies``: reference policies by name (``kvsched.reference.POLICIES``);
- ``configs``: engine scheduler configurations by name
  (``kvsched.reference.engine_scheduler.CONFIGS``);
- ``targets``: ``{name, target = "file.py:Class", policy}`` tables, schedulers under test, each
  hosted in a sandboxed process per cell (:mod:`.hosted`);
- ``workloads``: workload files, relative to the grid file;
- ``families``: ``{name, size}`` tables, each generated once per seed
  (``kvsched.reference.families.generate``);
- ``seeds``: the families' seeds (default ``[0]``); a file is one workload, whatever the seeds;
- ``limits``: tables overriding some of a workload's limits, one cell each; default: the
  workload's own.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kvsched.reference import POLICIES
from kvsched.reference.engine_scheduler import CONFIGS
from kvsched.reference.families import family_named
from kvsched.spec.vocabulary import POLICY_NAMES

from .cell import ENGINE_PREFIX, Cell, LimitsOverride
from .hosted import source_digest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; tomli is the same reader (a dependency there only)
    import tomli as tomllib


class GridError(ValueError):
    """The grid file cannot be swept; the message names the file, the key and what is wrong."""


class FamilyEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    size: int


class TargetEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    target: str
    """``file.py:Class``, the file relative to the grid file."""
    policy: str = ""
    """The policy it is judged by; default: the one the class declares."""


class GridFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The file's keys as written; :func:`load_grid` checks what their types cannot say."""

    policies: list[str] = []
    configs: list[str] = []
    targets: list[TargetEntry] = []
    workloads: list[str] = []
    families: list[FamilyEntry] = []
    seeds: list[int] = msgspec.field(default_factory=lambda: [0])
    limits: list[LimitsOverride] = []


Wrong = Callable[[str, str], GridError]
"""Makes the error for a key of the grid file and what is wrong with it."""


@dataclass(frozen=True)
class Grid:
    """A checked grid: its cells in a fixed order (workloads outer, then limits, schedulers)."""

    path: Path
    cells: tuple[Cell, ...]


def load_grid(path: Path) -> Grid:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise GridError(f"{path}: cannot read the grid file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise GridError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except tomllib.TOMLDecodeError as error:
        raise GridError(f"{path}: not valid TOML: {error}") from None
    try:
        grid = msgspec.convert(raw, GridFile)
    except msgspec.ValidationError as error:
        # msgspec names the key as a path, e.g. "Expected `int`, got `str` - at `$.seeds[1]`".
        raise GridError(f"{path}: {error}") from None
    return Grid(path, tuple(_cells(path, grid)))


def _cells(path: Path, grid: GridFile) -> list[Cell]:
    def wrong(key: str, what: str) -> GridError:
        return GridError(f"{path}: {key}: {what}")

    schedulers = [*_schedulers(grid, wrong), *_targets(path, grid, wrong)]
    for index, entry in enumerate(grid.families):
        try:
            family_named(entry.name)
        except ValueError as error:
            raise wrong(f"families[{index}].name", str(error)) from None
        if entry.size < 1:
            raise wrong(f"families[{index}].size", f"must be at least 1, got {entry.size}")
    for index, seed in enumerate(grid.seeds):
        if seed < 0:
            raise wrong(f"seeds[{index}]", f"must be a non-negative integer, got {seed}")
    _unique(grid.seeds, "seeds", wrong)
    if grid.families and not grid.seeds:
        raise wrong("seeds", "is empty: each family is generated once per seed")
    for index, override in enumerate(grid.limits):
        for name, value in msgspec.structs.asdict(override).items():
            if value is not None and value < 1:
                raise wrong(f"limits[{index}].{name}", f"must be at least 1, got {value}")
    _unique(grid.limits, "limits", wrong)
    _unique(grid.families, "families", wrong)
    workloads = [*_files(path, grid.workloads, wrong), *_families(grid)]
    if not workloads:
        raise wrong("workloads", "the grid names no workload: give workloads or families")
    overrides: Sequence[LimitsOverride] = grid.limits or [LimitsOverride()]
    return [
        Cell(name, workload, digest, limits, limits_key, *target)
        for workload, digest in workloads
        for limits_key, limits in _keyed(overrides, bool(grid.limits))
        for name, target in schedulers
    ]


def _schedulers(grid: GridFile, wrong: Wrong) -> list[tuple[str, tuple[str, ...]]]:
    for index, name in enumerate(grid.policies):
        if name not in POLICIES:
            known = ", ".join(POLICIES)
            raise wrong(f"policies[{index}]", f"{name!r} is not a reference policy ({known})")
    for index, name in enumerate(grid.configs):
        if name not in CONFIGS:
            known = ", ".join(CONFIGS)
            raise wrong(f"configs[{index}]", f"{name!r} is not an engine configuration ({known})")
    _unique(grid.policies, "policies", wrong)
    _unique(grid.configs, "configs", wrong)
    schedulers = [*grid.policies, *(ENGINE_PREFIX + name for name in grid.configs)]
    if not schedulers and not grid.targets:
        raise wrong("policies", "the grid names no scheduler: give policies, configs or targets")
    return [(name, ()) for name in schedulers]


def _targets(path: Path, grid: GridFile, wrong: Wrong) -> list[tuple[str, tuple[str, ...]]]:
    """Each target's name and (``/path/file.py:Class``, digest of its files, policy)."""
    found: list[tuple[str, tuple[str, ...]]] = []
    taken = {*POLICIES, *(ENGINE_PREFIX + name for name in CONFIGS)}
    for index, entry in enumerate(grid.targets):
        key = f"targets[{index}]"
        if entry.name in taken or not entry.name or entry.name.startswith(ENGINE_PREFIX):
            raise wrong(f"{key}.name", f"{entry.name!r} is taken: name the target otherwise")
        taken.add(entry.name)
        file, colon, name = entry.target.rpartition(":")
        if not colon or not file.endswith(".py") or not name.isidentifier():
            raise wrong(
                f"{key}.target",
                f"write file.py:Class (a file beside the grid or a path to one), got "
                f"{entry.target!r}; a grid hosts scheduler classes from files only, whose "
                "bytes key their cells",
            )
        if entry.policy and entry.policy not in POLICY_NAMES:
            known = ", ".join(POLICY_NAMES)
            raise wrong(f"{key}.policy", f"{entry.policy!r} is not a policy ({known})")
        source = (path.parent / file).resolve()
        try:
            digest = source_digest(source)
        except OSError as error:
            raise wrong(f"{key}.target", f"cannot read {source}: {error.strerror}") from None
        found.append((entry.name, (f"{source}:{name}", digest, entry.policy)))
    return found


def _files(path: Path, names: list[str], wrong: Wrong) -> list[tuple[str, str]]:
    """Each file as (path, digest of its bytes): a changed file is a new cell, never a resumed
    one."""
    found = []
    for index, name in enumerate(names):
        file = (path.parent / name).resolve()
        try:
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
        except OSError as error:
            raise wrong(f"workloads[{index}]", f"cannot read {file}: {error.strerror}") from None
        found.append((str(file), digest))
    _unique([f for f, _ in found], "workloads", wrong)
    return found


def _families(grid: GridFile) -> list[tuple[str, str]]:
    return [
        (f"family:{entry.name}:{entry.size}:{seed}", "")
        for entry in grid.families
        for seed in grid.seeds
    ]


def _keyed(overrides: Sequence[LimitsOverride], given: bool) -> list[tuple[str, LimitsOverride]]:
    """Each override with the key a finding of its cell names it by."""
    return [(f"limits[{i}]" if given else "", o) for i, o in enumerate(overrides)]


def _unique(values: Sequence[object], key: str, wrong: Wrong) -> None:
    for index, value in enumerate(values):
        if value in values[:index]:
            raise wrong(f"{key}[{index}]", f"repeats {key}[{values.index(value)}]")
