"""Where a sweep keeps its cells: one JSON file per finished cell, named by the cell's key.

A cell is written whole or not at all (:func:`kvsched.checks.verdict.files.write_file`: a synced
temporary file, then a rename), the moment it finishes; so a sweep stopped at any point leaves
only finished cells behind, and the next run over the same folder runs only the others.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import msgspec

from kvsched.checks.verdict.files import write_file

from .cell import CELL_FORMAT, Cell, CellResult

CELLS = "cells"
"""The folder under the sweep's ``--out`` that holds one ``KEY.json`` per finished cell."""


class StoreFailure(Exception):
    """A finished cell could not be stored: the sweep's output failed, not the cell."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"{path}: {error.strerror or error}")
        self.path, self.error = path, error


class CellStore:
    def __init__(self, out: Path, stream: TextIO | None = None) -> None:
        self.folder = out / CELLS
        self.stream = sys.stderr if stream is None else stream

    def path(self, cell: Cell) -> Path:
        return self.folder / f"{cell.key}.json"

    def finished(self, cells: Iterable[Cell]) -> dict[str, CellResult]:
        """The stored result of each of ``cells`` that has one, by key.

        A stored file that is not a result of this very cell (edited by hand, or written by a
        kvsched whose results hold other things) is not trusted: its cell runs again and the
        file is replaced.
        """
        found: dict[str, CellResult] = {}
        for cell in cells:
            path = self.path(cell)
            try:
                data = path.read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as error:
                print(f"{path}: cannot read ({error.strerror}); running it again", file=self.stream)
                continue
            try:
                result = msgspec.json.decode(data, type=CellResult)
            except msgspec.DecodeError as error:
                print(f"{path}: not a stored cell ({error}); running it again", file=self.stream)
                continue
            if result.format != CELL_FORMAT or result.key != cell.key or not _same(result, cell):
                print(f"{path}: stored for another cell; running it again", file=self.stream)
                continue
            # The grid's current words for the cell (its file's path, its limits' key).
            found[cell.key] = msgspec.structs.replace(result, cell=cell)
        return found

    def put(self, result: CellResult) -> None:
        """Store ``result``; StoreFailure if it cannot be written whole."""
        path = self.path(result.cell)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_file(path, msgspec.json.format(msgspec.json.encode(result)))
        except OSError as error:
            raise StoreFailure(path, error) from None


def _same(result: CellResult, cell: Cell) -> bool:
    """The stored definition is this cell's; where the grid lists its limits may move."""
    stored = result.cell
    return (stored.scheduler, stored.digest or stored.workload, stored.limits) == (
        cell.scheduler,
        cell.digest or cell.workload,
        cell.limits,
    )
