"""``kvsched sweep --cluster``: the same 2x2x2 grid on a real Dask cluster and on the local pool.

The test starts the cluster itself: a LocalCluster on loopback, two worker processes of one
thread each. It needs the cluster extra (``pip install -e '.[cluster]'``), so it is marked
``cluster``, left out of the default run, and run by CI in a step of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_grids import write_grid

from kvsched.cli import main

pytestmark = pytest.mark.cluster


def test_a_cluster_gives_what_the_local_pool_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from distributed import LocalCluster

    grid = write_grid(tmp_path)
    local, remote = tmp_path / "local", tmp_path / "cluster"
    assert main(["sweep", str(grid), "--out", str(local), "--jobs", "2"]) == 0
    with LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        address = cluster.scheduler_address
        assert main(["sweep", str(grid), "--out", str(remote), "--cluster", address]) == 0
        # One task per cell, computed by the cluster's workers: the scheduler counts each task
        # that reached a worker's memory, and the compute time they reported.
        prefix = cluster.scheduler.task_prefixes["kvsched-cell"]
        assert prefix.state_counts["memory"] == 8
        assert prefix.all_durations["compute"] > 0
    assert f"running 8 on the Dask cluster at {address}" in capsys.readouterr().err
    assert (remote / "sweep.json").read_bytes() == (local / "sweep.json").read_bytes()
