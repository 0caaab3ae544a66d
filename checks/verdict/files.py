"""Writing the files a check leaves behind (JUnit XML, counterexamples) without following links.

The target may have run in the current directory before kvsched writes its files, and may have
planted symbolic links there (``.kvsched`` pointing at a home directory, ``report.xml`` at a
shell profile). So a file is written to a fresh temporary name in its folder, opened with
``O_EXCL | O_NOFOLLOW``, and renamed over the final name: a link there is replaced, never followed.
The folders inside the current directory are walked one by one with ``O_NOFOLLOW`` and made if
missing, so a link planted in place of one of them is refused; a folder elsewhere is the user's
own to name, and only its last part must not be a link.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` by temporary file and rename; OSError names what failed."""
    if path.name in ("", ".", ".."):
        raise IsADirectoryError(21, "a file name is needed, not a folder", str(path))
    folder = open_folder(path.parent)
    temporary = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temporary, _FLAGS, 0o644, dir_fd=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            os.unlink(temporary, dir_fd=folder)
            raise
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
