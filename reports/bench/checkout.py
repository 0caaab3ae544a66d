"""Commits as importable trees: a throwaway clone, each commit exported and laid out as kvsched.

The repository is only read (``git clone --shared``). Each commit is exported with ``git archive``
and its folders are copied where its own ``pyproject.toml`` maps them (``package-dir``), so an
old commit is imported as it was, with no build and no download.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; pip's vendored copy of it is the same reader
    from pip._vendor import tomli as tomllib

_IDENTITY = ("-c", "user.name=kvsched bench", "-c", "user.email=bench@kvsched.invalid")


class CheckoutError(Exception):
    """A repository, a revision or a commit's layout that cannot be used; the user's to fix."""


@dataclass(frozen=True)
class Export:
    """A commit's files (``source``) and the package kvsched laid out from them (``site``)."""

    source: Path
    site: Path


def toplevel(where: Path) -> Path:
    """The root of the git repository around ``where``."""
    try:
        return Path(git(where, "rev-parse", "--show-toplevel").strip())
    except CheckoutError:
        raise CheckoutError(f"{where} is not inside a git repository (see --repo)") from None


def commit_of(repo: Path, revision: str) -> str:
    """The full hash of ``revision`` in ``repo``."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    except CheckoutError:
        raise CheckoutError(f"{revision!r} is not a commit of {repo}") from None


def shared_clone(repo: Path, clone: Path) -> None:
    git(clone.parent, "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(clone))


def snapshot(repo: Path, clone: Path) -> str:
    """Commit the working tree of ``repo`` (tracked and unignored files) in the clone."""
    listed = git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in sorted(set(listed.split("\0")) - {""}):
        path = repo / name
        if path.is_file():  # a deleted file stays listed in the index
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, clone / name)
    git(clone, "add", "--all")
    message = f"working tree of {repo}"
    git(clone, *_IDENTITY, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return git(clone, "rev-parse", "HEAD").strip()


def export(clone: Path, commit: str, folder: Path) -> Export:
    """Export ``commit`` and lay it out as the package kvsched, per its pyproject.toml."""
    source, site = folder / "source", folder / "site"
    archive = _git_bytes(clone, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
        package_dir: dict[str, str] = project["tool"]["setuptools"]["package-dir"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise CheckoutError(
            f"commit {commit[:8]}: no [tool.setuptools] package-dir in pyproject.toml ({error}); "
            "cannot tell how its folders make the package kvsched"
        ) from None
    for package, path in sorted(package_dir.items(), key=lambda item: item[0].count(".")):
        shutil.copytree(source / path, site.joinpath(*package.split(".")), dirs_exist_ok=True)
    return Export(source, site)


def git(where: Path, *arguments: str) -> str:
    return _git_bytes(where, *arguments).decode()


def _git_bytes(where: Path, *arguments: str) -> bytes:
    done = subprocess.run(["git", "-C", str(where), *arguments], capture_output=True, check=False)
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise CheckoutError(f"git {arguments[0]} failed: {message}")
    return done.stdout
