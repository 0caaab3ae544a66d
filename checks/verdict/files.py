"""Writing the files kvsched leaves behind (JUnit XML, counterexamples, reports) whole, without
following links.

The target may have run in the current directory before kvsched writes its files, and may have
planted symbolic links there (``.kvsched`` pointing at a home directory, ``report.xml`` at a
shell profile). So a file is written to a fresh temporary name in its folder, opened with
``O_EXCL | O_NOFOLLOW``, and renamed over the final name: a link there is replaced, never followed.
The folders inside the current directory are walked one by one with ``O_NOFOLLOW`` and made if
missing, so a link planted in place of one of them is refused; a folder elsewhere is the user's
own to name, and only its last part must not be a link.

The same rename makes every file whole or absent: a write cut short (a full disk, ``ulimit -f``)
removes its temporary file and leaves the final name as it was, so a grader never reads half a
JUnit report, and the data is synced before the rename, so a crash of the machine cannot leave
the new name on an empty file either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from dataclasses import replace
from pathlib import Path

from kvsched.checks.verdict.report import Report
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.vocabulary import POLICY_NAMES
from kvsched.spec.workload import workload_to_json

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, by synced temporary file and rename.

    OSError names ``path`` (never the temporary name) and leaves ``path`` as it was.
    """
    if path.name in ("", ".", ".."):
        raise IsADirectoryError(21, "a file name is needed, not a folder", str(path))
    try:
        _write_whole(path, data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None


def _write_whole(path: Path, data: bytes) -> None:
    folder = open_folder(path.parent)
    temporary = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temporary, _FLAGS, 0o644, dir_fd=folder)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=folder)
            raise
        # The rename itself, durable; some file systems cannot sync a folder, and the file is
        # whole either way.
        with contextlib.suppress(OSError):
            os.fsync(folder)
    finally:
        os.close(folder)


def open_folder(path: Path, create: bool = False) -> int:
    """A descriptor of the folder ``path``, walked without following links inside the current
    folder (where the target ran); made, with the folders above it, if ``create``."""
    absolute = Path(os.path.abspath(path))  # lexical: resolving would follow the links
    try:
        parts = absolute.relative_to(os.getcwd()).parts
        start = "."
    except ValueError:  # a folder elsewhere, named by the user: only its last part is walked
        if create:
            os.makedirs(absolute.parent, exist_ok=True)
        start, parts = str(absolute.parent), (absolute.name,) if absolute.name else ()
    current = os.open(start, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=current)
            following = os.open(part, _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def make_folder(path: Path) -> None:
    """Create ``path`` (and the folders above it) without following links on the way."""
    os.close(open_folder(path, create=True))


def save_failing_workloads(report: Report, directory: Path) -> Report:
    """Write every failing workload as a workload file; the report then names the files."""
    verdicts = []
    for verdict in report.verdicts:
        failing = verdict.counterexample
        if failing is None or verdict.finding is None or failing.saved_to:
            verdicts.append(verdict)
            continue
        document = workload_to_json(failing.workload)
        text = json.dumps(document, indent=2) + "\n"
        digest = hashlib.sha1(text.encode()).hexdigest()[:8]
        path = directory / _file_name(verdict.policy, verdict.finding.invariant, digest)
        make_folder(directory)
        write_file(path, text)
        verdicts.append(replace(verdict, counterexample=replace(failing, saved_to=str(path))))
    return replace(report, verdicts=tuple(verdicts))


def _file_name(policy: str, invariant: str, digest: str) -> str:
    """A counterexample's file name, from known words only: a log may name any policy."""
    known = {i.id for i in CATALOGUE}
    return (
        f"{policy if policy in POLICY_NAMES else 'target'}-"
        f"{invariant if invariant in known else 'finding'}-{digest}.json"
    )
