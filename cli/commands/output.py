"""What a command writes, delivered whole or reported as not delivered: never a silent pass.

A grader reads the exit code and the verdict; a verdict cut short (the reader of a pipe gone,
a full disk, the file-size limit) must not leave an exit code that says "pass". So every command
prints inside :func:`printing` and writes its files inside :func:`writing`, which turn the
operating system's error into :class:`OutputFailure`; ``kvsched.cli`` makes that one line on
stderr and exit :attr:`~kvsched.spec.vocabulary.ExitCode.WRITE_FAILED`, whatever the verdict
was. Files themselves are written whole or not at all (``kvsched.checks.verdict.files``).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STDOUT = "standard output"

_HINTS = {
    errno.EPIPE: "the reader of the pipe closed it before the end, as `| head` does",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is spent",
    errno.EFBIG: "the file-size limit of this shell (ulimit -f) is reached",
    errno.EBADF: "it is closed; run kvsched with its standard output open",
    errno.ELOOP: "a symbolic link stands in the path; kvsched does not follow links in the "
    "folder the target ran in, so name a path without one",
    errno.ENOTDIR: "a part of the path is a file or a symbolic link, not a folder; kvsched does "
    "not follow links in the folder the target ran in, so name a path without one",
}


class OutputFailure(Exception):
    """Part of what a command had to write was not written; its exit code is WRITE_FAILED."""

    def __init__(self, what: str, error: OSError) -> None:
        super().__init__(what, error)
        self.what = what
        self.error = error

    def __str__(self) -> str:
        # The option says which output; the file, when another, says where it broke.
        where = self.error.filename if isinstance(self.error.filename, str) else ""
        named = f"{self.what}: {where}" if where and where not in self.what else self.what
        reason = self.error.strerror or type(self.error).__name__
        hint = _HINTS.get(self.error.errno or 0, "")
        return (
            f"cannot write {named} ({reason}{': ' + hint if hint else ''}); an output is "
            "missing, so this run is no pass, whatever its verdict"
        )


@contextmanager
def writing(what: str) -> Iterator[None]:
    """The block writes ``what`` (a file, named as the user gave it); its OSError is not a bug of
    kvsched nor a verdict but an :class:`OutputFailure`."""
    try:
        yield
    except OSError as error:
        raise OutputFailure(what, error) from None


@contextmanager
def printing() -> Iterator[None]:
    """The block prints to standard output, flushed before the block ends, so that a failed
    write is seen here rather than lost in the interpreter's flush at exit."""
    with writing(STDOUT):
        if sys.stdout is None:  # started with fd 1 closed: print() would drop the verdict
            raise OSError(errno.EBADF, "Bad file descriptor")
        yield
        sys.stdout.flush()


def emit(text: str) -> None:
    """Print ``text`` and a newline to standard output, all of it or :class:`OutputFailure`."""
    with printing():
        print(text)


def fresh_folder(name: str) -> Path:
    """``name`` in the current folder, or ``name-2``, ``name-3``...: the first not taken, so a
    report written without ``--out`` never replaces anything."""
    candidate, number = Path(name), 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = Path(f"{name}-{number}")
    return candidate
