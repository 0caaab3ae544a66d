"""Sweeps: a grid of schedulers x workloads x seeds x limits, one checked and measured run per
cell, on a local process pool or a Dask cluster, resumable, merged into one report and gate
(docs/sweeps.md).

:mod:`.grid` reads the grid file, :mod:`.cell` is one cell's definition, work and result,
:mod:`.store` keeps finished cells, :mod:`.execute` runs the missing ones and :mod:`.merged`
writes the report.
"""

from .cell import Cell, CellResult, run_cell
from .execute import ClusterError, sweep
from .grid import Grid, GridError, load_grid
from .merged import SweepReport, merged, render_table, report_json
from .store import StoreFailure

__all__ = [
    "Cell",
    "CellResult",
    "ClusterError",
    "Grid",
    "GridError",
    "StoreFailure",
    "SweepReport",
    "load_grid",
    "merged",
    "render_table",
    "report_json",
    "run_cell",
    "sweep",
]
