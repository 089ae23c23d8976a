"""A sweep's fast path (menus, conversion tables and finished graph solutions memoised
across points, the kernel-by-kernel tile by frontier.best_fit, rows written in groups) gives
the rows the plain per-point path gives: every point solved alone in this process, nothing
memoised, the tile taken from the whole frontier menu as before (`menu(..., size=1)[-1:]`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.sweeps import load_sweep, run_sweep
from mapshard.sweeps import worker as sweep_worker
from mapshard.sweeps.store import read_rows
from mapshard.sweeps.worker import Job, solve_point
from solver.cost import frontier, memo
from tests.e2e.test_sweep import comparable, write_sweep

# library chips (calibrated menus), TP 1 and 4 over one switch, two length pairs, two
# chip prices: 16 kernel-by-kernel request points, each a prefill and a decode graph (the
# price changes no graph's inner problem: a worker reuses the first price's solutions)
SWEEP = """inline {
  name: "fast_path"
  workload { llm_inference {
    model { inline { name: "small" architecture: "llama" hidden_size: 1024 num_layers: 4
      num_heads: 8 num_kv_heads: 2 intermediate_size: 2816 vocab_size: 32000 ffn: SWIGLU
      norm: RMSNORM } }
    phase: REQUEST batch: 16 input_len: 128 output_len: 32 } }
  system { chip: "H100-SXM5-80GB"
    topology { kind: SWITCH degree: 2 link_bw_GBps: 450 parallelism: "TP" } }
  execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }
}
axis { field: "system.chip" name: "chip" values: ["H100-SXM5-80GB", "MI300X"] }
axis { field: "system.topology.degree" name: "tp_degree" values: ["1", "4"] }
axis { field: "cost.accelerator_price" name: "price" values: ["20000", "30000"] }
axis { field: "workload.llm_inference" name: "lengths"
       values: ["input_len: 128 output_len: 32", "input_len: 512 output_len: 64"] }
"""


def _menu_tile(m: int, k: int, n: int, buffer_elements: float) -> tuple:
    """The kernel-by-kernel tile as it was taken before frontier.best_fit."""
    return tuple(frontier.menu(m, k, n, buffer_elements, size=1)[-1:])


def test_fast_sweep_rows_equal_plain_per_point_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_sweep(write_sweep(tmp_path, SWEEP))
    fast = run_sweep(spec, out=tmp_path / "out", workers=1, quiet=True, write_outputs=False)
    assert fast.ran == 16 and fast.counts == {"optimal": 16}
    fast_rows = read_rows(tmp_path / "out" / "results.csv")

    monkeypatch.setattr(frontier, "best_fit", _menu_tile)
    memo.set_enabled(False)
    try:
        plain = []
        for p in fast.points:
            sweep_worker._WORKLOADS.clear()  # the graph generated again for every point
            job = Job(p.point_id, p.cells(spec.axis_names), p.text, p.workload_key)
            plain.append(solve_point(job, spec.base_path, spec.filters))
    finally:
        memo.restore()
    assert len(fast_rows) == len(plain) == 16
    assert comparable(fast_rows) == comparable(plain)
    # single-option graphs (TP 1) and sharded menus (TP 4); decode menus repeat across the
    # length pairs, so the worker's memo answers some of them
    assert {r["tp"] for r in fast_rows} == {"1", "4"}
