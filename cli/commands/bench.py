"""``kvsched bench``: run the asv suite on two commits and gate on the deterministic figures.

With asv 0.6.6 and no network, ``asv continuous`` cannot do this (it refuses an existing
environment), so the command does it step by step, in a temporary folder:

1. a throwaway clone of the repository (``git clone --shared``: the repository is only read). The
   candidate is a commit, or by default the working tree, committed in the clone;
2. each commit exported (``git archive``) and laid out as the package ``kvsched`` the way its
   ``pyproject.toml`` maps folders to subpackages: no build, no download;
3. ``asv machine --yes``, then per commit ``asv run --python=same --set-commit-hash=COMMIT`` with
   ``ASV_PYTHONPATH`` at that commit's kvsched (asv drops ``PYTHONPATH``). The suite run on both
   is the candidate's ``benchmarks/``;
4. ``asv compare``, which always exits 0, so the gate reads the table it prints.

The gate looks only at the ``track_*`` figures of ``benchmarks/teaching.py`` and
``benchmarks/families.py``: deterministic replays, so any change is real. A figure that got worse
(or failed) exits 1. Times and memory vary by tens of percent on shared cores; they are printed
for information and never fail the gate. ``--quick`` runs the fast deterministic benchmarks once
each, in well under a minute; CI runs it (tests/test_bench_smoke.py).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from kvsched.commands import UsageError
from kvsched.spec.vocabulary import ExitCode

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; pip's vendored copy of it is the same reader
    from pip._vendor import tomli as tomllib

GATED_MODULES = ("teaching", "families")
HIGHER_IS_BETTER = ("track_utilization",)
"""Gated figures for which a rise is an improvement; for every other one a rise is worse."""
QUICK_BENCHMARKS = (r"^teaching\.", r"^families\.Stepped\.")
MACHINE = "kvsched-bench"
_IDENTITY = ("-c", "user.name=kvsched bench", "-c", "user.email=bench@kvsched.invalid")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="compare the asv benchmarks of two commits; exit 1 if a tracked figure got worse",
        description="Run the asv suite (benchmarks/) for BASE and CANDIDATE offline in this "
        "Python environment, print asv's comparison, and gate on the deterministic track_* "
        "figures of the teaching trace and the workload families.",
    )
    parser.add_argument("--base", default="HEAD", help="baseline commit (default: HEAD)")
    parser.add_argument(
        "--candidate", help="commit to judge (default: the working tree, uncommitted changes too)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only the fast deterministic benchmarks, one sample each (the CI smoke)",
    )
    parser.add_argument(
        "--bench", action="append", metavar="REGEX", help="asv --bench selection (repeatable)"
    )
    parser.add_argument(
        "--factor", type=float, default=1.1, help="ratio asv marks as a change of time (1.1)"
    )
    parser.add_argument("--repo", type=Path, help="repository (default: the one around here)")
    parser.add_argument("--results", type=Path, help="keep asv's results in this folder")
    parser.add_argument("--all", action="store_true", help="print asv compare's whole table")
    parser.set_defaults(func=main)


class AsvError(Exception):
    """asv itself failed (not a benchmark: asv saves and compares those)."""


@dataclass(frozen=True)
class Export:
    """A commit's files (``source``) and the package kvsched laid out from them (``site``)."""

    source: Path
    site: Path


@dataclass(frozen=True)
class Row:
    """One line of ``asv compare``'s table."""

    mark: str  # asv's: '+' larger, '-' smaller, '!' now failing, 'x' not comparable, '*' fixed
    before: str
    after: str
    ratio: str
    name: str

    @property
    def method(self) -> str:
        return self.name.split("(")[0].rpartition(".")[2]

    @property
    def gated(self) -> bool:
        return self.name.partition(".")[0] in GATED_MODULES and self.method.startswith("track_")

    @property
    def worse(self) -> bool:
        return self.mark == "!" or self.mark == ("-" if self.method in HIGHER_IS_BETTER else "+")


def main(args: argparse.Namespace) -> int:
    repo = _toplevel(args.repo or Path.cwd())
    with tempfile.TemporaryDirectory(prefix="kvsched-bench-") as scratch:
        work = Path(scratch)
        clone = work / "repo"
        base = _commit(repo, args.base)
        named = _commit(repo, args.candidate) if args.candidate else ""
        _git(work, "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(clone))
        candidate = named or _snapshot(repo, clone)
        label = args.candidate or "the working tree"
        print(f"kvsched bench: base {args.base} ({base[:8]}) against {label} ({candidate[:8]})")
        exports = {commit: _export(clone, commit, work / commit) for commit in {base, candidate}}
        results = args.results.resolve() if args.results else work / "results"
        config = _asv_config(work, clone, exports[candidate], results)
        selection = args.bench or (list(QUICK_BENCHMARKS) if args.quick else [])
        try:
            _asv(config, "machine", "--yes", "--machine", MACHINE)
            for name, commit in (("base", base), ("candidate", candidate)):
                print(f"kvsched bench: asv run for the {name} ({commit[:8]}) ...", flush=True)
                _run_suite(config, commit, exports[commit].site, selection, args.quick)
            compare = ["compare", "--split", "--machine", MACHINE, base, candidate]
            shown = _asv(config, *compare, f"--factor={args.factor}")
            strict = _asv(config, *compare, "--factor=1.0")  # any change of an exact figure
        except AsvError as error:
            print(f"kvsched bench: {error}", file=sys.stderr)
            return ExitCode.INTERNAL
    print(shown if args.all else _information(parse_compare(shown), args.factor))
    return _gate(parse_compare(strict))


def parse_compare(output: str) -> list[Row]:
    """The rows of the tables ``asv compare --split`` prints (tabulate's github format)."""
    rows = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 5 or cells[0] == "Change":
            continue
        if cells[0].startswith("--"):  # the |----|----| rule under the header
            continue
        name = cells[4].split(" [")[0]  # several environments add " [machine/env]"
        rows.append(Row(cells[0], cells[1], cells[2], cells[3], name))
    return rows


def _information(rows: list[Row], factor: float) -> str:
    """Times, memory and ratios: shown, never gated."""
    shown = [[r.mark, r.before, r.after, r.ratio, r.name] for r in rows if not r.gated]
    if not shown:
        return "(no time or memory benchmarks in this selection)"
    title = f"Time and memory, for information (asv marks changes beyond x{factor:g}):"
    headers = ["", "base", "candidate", "ratio", "benchmark"]
    return f"{title}\n{tabulate(shown, headers=headers, tablefmt='github')}"


def _gate(rows: list[Row]) -> int:
    gated = [row for row in rows if row.gated]
    worse = [row for row in gated if row.worse]
    changed = [row for row in gated if row.mark in ("+", "-", "*") and not row.worse]
    print(
        f"\nGate on the exact track_* figures of benchmarks/{{{','.join(GATED_MODULES)}}}.py: "
        f"{len(gated)} compared, {len(worse)} worse, {len(changed)} better or newly passing."
    )
    for row in worse:
        print(f"  WORSE   {row.name}: {row.before} -> {row.after}")
    for row in changed:
        print(f"  better  {row.name}: {row.before} -> {row.after}")
    if not gated:
        print("kvsched bench: asv compared no gated figure; is benchmarks/ there?", file=sys.stderr)
        return ExitCode.INTERNAL
    return ExitCode.FINDING if worse else ExitCode.OK


def _run_suite(config: Path, commit: str, site: Path, selection: list[str], quick: bool) -> None:
    arguments = ["run", "--python=same", f"--set-commit-hash={commit}", "--machine", MACHINE]
    arguments += ["--quick"] if quick else []
    for regex in selection:
        arguments += ["--bench", regex]
    # asv exits 2 when some benchmarks failed: their results are saved and compare shows them.
    _asv(config, *arguments, pythonpath=site, accept=(0, 2))


def _asv(
    config: Path, *arguments: str, pythonpath: Path | None = None, accept: tuple[int, ...] = (0,)
) -> str:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["ASV_PYTHONPATH"] = str(pythonpath)
    command = [sys.executable, "-m", "asv", arguments[0], "--config", str(config), *arguments[1:]]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in accept:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise AsvError(f"asv {arguments[0]} exited {done.returncode}:\n{tail}")
    return done.stdout


def _asv_config(work: Path, clone: Path, candidate: Export, results: Path) -> Path:
    """The candidate's asv.conf.json, pointed at the clone and the candidate's benchmarks."""
    source = candidate.source
    lines = (source / "asv.conf.json").read_text(encoding="utf-8").splitlines()
    config = json.loads("\n".join(line for line in lines if not line.lstrip().startswith("//")))
    config.update(
        repo=str(clone),
        benchmark_dir=str(source / config.get("benchmark_dir", "benchmarks")),
        results_dir=str(results),
        html_dir=str(work / "html"),
        env_dir=str(work / "env"),
        branches=["HEAD"],
    )
    path = work / "asv.conf.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def _export(clone: Path, commit: str, folder: Path) -> Export:
    """Export ``commit`` and lay it out as the package kvsched, per its pyproject.toml."""
    source, site = folder / "source", folder / "site"
    archive = _git_bytes(clone, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
        package_dir: dict[str, str] = project["tool"]["setuptools"]["package-dir"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise UsageError(
            f"commit {commit[:8]}: no [tool.setuptools] package-dir in pyproject.toml ({error}); "
            "cannot tell how its folders make the package kvsched"
        ) from None
    for package, path in sorted(package_dir.items(), key=lambda item: item[0].count(".")):
        shutil.copytree(source / path, site.joinpath(*package.split(".")), dirs_exist_ok=True)
    return Export(source, site)


def _snapshot(repo: Path, clone: Path) -> str:
    """Commit the working tree of ``repo`` (tracked and unignored files) in the clone."""
    listed = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in sorted(set(listed.split("\0")) - {""}):
        path = repo / name
        if path.is_file():  # a deleted file stays listed in the index
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, clone / name)
    _git(clone, "add", "--all")
    message = f"working tree of {repo}"
    _git(clone, *_IDENTITY, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return _git(clone, "rev-parse", "HEAD").strip()


def _toplevel(where: Path) -> Path:
    try:
        return Path(_git(where, "rev-parse", "--show-toplevel").strip())
    except UsageError:
        raise UsageError(f"{where} is not inside a git repository (see --repo)") from None


def _commit(repo: Path, revision: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    except UsageError:
        raise UsageError(f"{revision!r} is not a commit of {repo}") from None


def _git(where: Path, *arguments: str) -> str:
    return _git_bytes(where, *arguments).decode()


def _git_bytes(where: Path, *arguments: str) -> bytes:
    done = subprocess.run(["git", "-C", str(where), *arguments], capture_output=True, check=False)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise UsageError(f"git {arguments[0]} failed: {message}")
    return done.stdout
