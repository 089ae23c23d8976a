"""A kernel-by-kernel sweep answered by the exact elimination (solver/milp/exact_kbk.py)
gives the rows the HiGHS path gives: the same statuses and parallel degrees, and latencies
no higher, and lower by at most HiGHS's relative gap (SolverOptions.gap = 1e-4: HiGHS
stops within it, the elimination does not), on the fast-path sweep's 8 H100 request points
(TP 1: one sharding per kernel; TP 4: sharded menus and shared conversions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.sweeps import expand_points, load_sweep
from mapshard.sweeps.worker import Job, solve_point
from solver.fusion.solve import solve_graph
from solver.search import planner
from tests.e2e.test_sweep import write_sweep
from tests.e2e.test_sweep_fast_path import SWEEP

GAP = 1e-4  # SolverOptions.gap, HiGHS's relative stopping gap
LATENCIES = ("latency_s", "ttft_s", "tpot_s")
SAME = ("status", "tp", "pp", "dp", "ep", "num_chips", "system_cost", "workload_flop")


def _rows(spec) -> list[dict[str, str]]:
    points, _ = expand_points(spec)
    return [  # the first chip's points (the chip is the first axis)
        solve_point(
            Job(p.point_id, p.cells(spec.axis_names), p.text, p.workload_key),
            spec.base_path,
            spec.filters,
        )
        for p in points[:8]
    ]


def test_exact_rows_equal_highs_rows_up_to_its_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_sweep(write_sweep(tmp_path, SWEEP))
    exact = _rows(spec)
    monkeypatch.setattr(planner, "solve_graph", solve_graph)  # HiGHS for every graph
    highs = _rows(spec)
    assert len(exact) == len(highs) == 8
    for e, h in zip(exact, highs):
        assert e["point_id"] == h["point_id"] and e["status"] == "optimal"
        assert {k: e[k] for k in SAME} == {k: h[k] for k in SAME}
        for key in LATENCIES:
            got, ref = float(e[key]), float(h[key])
            assert ref * (1 - GAP) <= got <= ref * (1 + 1e-12), (e["point_id"], key)
    assert {r["tp"] for r in exact} == {"1", "4"} and {r["chip"] for r in exact} == {
        "H100-SXM5-80GB"
    }
