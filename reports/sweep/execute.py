"""Run a sweep's missing cells, on a local process pool or on a Dask cluster, one task per cell.

Each result is stored the moment it arrives (:class:`.store.CellStore`) and a line on stderr
says which cell finished and how; the merged result is in grid order whatever order the cells
finished in, so a sweep on a cluster and one on the local pool give the same report.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import signal
import sys
from collections.abc import Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, TextIO

from .cell import Cell, CellResult, run_cell
from .grid import Grid, GridError
from .hosted import CellError
from .store import CellStore


class ClusterError(RuntimeError):
    """The cluster cannot be used (not installed, not reachable); the message says which."""


def sweep(
    grid: Grid, out: Path, stream: TextIO, jobs: int = 1, cluster: str | None = None
) -> tuple[CellResult, ...]:
    """Every cell of ``grid``'s result, in grid order: stored ones read, the others run."""
    store = CellStore(out, stream)
    done = store.finished(grid.cells)
    todo = list({cell.key: cell for cell in grid.cells if cell.key not in done}.values())
    where = f"the Dask cluster at {cluster}" if cluster else _pool_words(jobs)
    print(
        f"kvsched sweep: {len(grid.cells)} cells, {len(grid.cells) - len(todo)} already in "
        f"{store.folder}; running {len(todo)} on {where}",
        file=stream,
    )
    results = _on_cluster(todo, cluster) if cluster else _on_pool(todo, jobs)
    try:
        for count, result in enumerate(results, 1):
            store.put(result)
            done[result.key] = result
            verdict = result.invariant or "ok"
            print(f"  [{count}/{len(todo)}] {result.cell.label}: {verdict}", file=stream)
    except CellError as error:
        raise GridError(f"{grid.path}: {error}") from None
    finally:
        results.close()
    return tuple(done[cell.key] for cell in grid.cells)


def _pool_words(jobs: int) -> str:
    return "this process" if jobs == 1 else f"a pool of {jobs} processes"


def _on_pool(cells: Sequence[Cell], jobs: int) -> Generator[CellResult]:
    if jobs == 1 or len(cells) <= 1:
        yield from (run_cell(cell) for cell in cells)
        return
    # Spawned, not forked: a fork copies whatever threads and locks the parent holds.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_start)
    try:
        pending: set[Future[CellResult]] = {pool.submit(run_cell, cell) for cell in cells}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from (future.result() for future in finished)
    except BaseException:
        # Stopped early (Ctrl-C, SIGTERM, an invalid cell): the running cells are abandoned,
        # not awaited, which could take a cell's whole budget; their hosts die with the workers.
        _kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # the cells not started never start


def _worker_start() -> None:
    """A worker leaves SIGINT to kvsched, which decides what a Ctrl-C stops (a terminal sends it
    to the workers too), and never outlives kvsched, however kvsched ends: its watchdog exits
    without awaiting the pool if the unwinding takes too long (Linux's PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    kill = getattr(pool, "kill_workers", None)  # Python 3.14
    if kill is not None:
        kill()
        return
    # Before 3.14 the pool does not say which processes are its workers but in this attribute.
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.kill()


def _on_cluster(cells: Sequence[Cell], address: str | None) -> Generator[CellResult]:
    # Imported as Any: whether Dask is installed (the cluster extra) must not change what the
    # type checker sees, and distributed's own functions are untyped.
    try:
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise ClusterError(
            "--cluster needs Dask's distributed scheduler: pip install 'kvsched[cluster]'"
        ) from None
    try:
        client = distributed.Client(address, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as error:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    futures: list[Any] = []
    try:
        # The cell's key is the task's: one task per cell, and a cell listed twice runs once.
        futures = [
            client.submit(run_cell, cell, key=f"kvsched-cell-{cell.key}", retries=0)
            for cell in cells
        ]
        for future in distributed.as_completed(futures, loop=client.loop):
            yield future.result()
    finally:
        client.cancel(futures)
        client.close()
