"""A sweep through a Dask distributed scheduler gives the rows of a local-process run."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sweep import TINY_LLM, comparable, write_sweep

from mapshard.sweeps import load_sweep, run_sweep

pytestmark = pytest.mark.slow  # worker processes and signals: seconds each

distributed = pytest.importorskip("distributed")


def test_dask_cluster_equals_local_processes(tmp_path: Path) -> None:
    sweep = write_sweep(
        tmp_path,
        TINY_LLM
        + """
axis { field: "system.num_chip" name: "chips" values: ["2", "4"] }
axis { field: "system.memory.dram_cap" name: "dram_cap" values: ["1e9", "1e4"] }
axis { field: "system.topology.degree" name: "degree" values: ["4", "2"] }
""",
    )
    spec = load_sweep(sweep)
    local = run_sweep(spec, out=tmp_path / "local", workers=2, quiet=True, write_outputs=False)
    assert local.counts == {"optimal": 2, "infeasible": 2, "failed": 4}
    infeasible = [r for r in local.rows if r["status"] == "infeasible"]
    assert all(r["reason"].startswith("DRAM capacity: ") for r in infeasible)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        remote = run_sweep(
            spec, out=tmp_path / "dask", cluster=cluster.scheduler_address, quiet=True
        )
    assert not remote.interrupted and remote.ran == 8
    assert comparable(remote.rows) == comparable(local.rows)
    assert (tmp_path / "dask" / "sweep_report.html").is_file()
