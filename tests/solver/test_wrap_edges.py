"""A wrap edge (a repeated layer's output feeding the next instance's first reader) pays
its layout conversion but orders and fuses nothing (solver.cost.problem.EdgeCost.wrap).

Found on Llama-3.1-8B REQUEST, DATAFLOW, TP 2 on two H200s: the prefill layer's wrap edge
mlp_residual -> attn_norm closed a cycle in the fusion search's DAG, so the lattice of ideals
held only the empty ideal, the search returned "infeasible" at once, and the planner blamed
DRAM ("no sharding stores its weights in 4.7 GB per layer") with 151 GB free per chip.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from solver_fixtures import elementwise, gemm, residual_add, small_system, tp2_problem

from generator.graph import Edge, KernelGraph
from mapshard.cli import EXIT_NO_PLAN, main
from solver.check import brute_force
from solver.fusion.ideals import enumerate_ideals, topological_orders
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import check_pins, solve_graph
from solver.options import SolverOptions
from solver.plan import MemoryUse
from solver.search import infeasible, planner

H, T = 64, 32  # hidden width and tokens of the diamond's kernels


def diamond_layer() -> KernelGraph:
    """A -> B, A -> C, B -> D, C -> D within an instance (a GEMM, two elementwise
    branches, their sum); D's output is the next instance's input of A (the boundary: a
    wrap edge, as a transformer layer's residual output feeds the next layer's norm)."""
    nbytes = T * H * 2
    kernels = (
        gemm("A", T, H, H),
        elementwise("B", T, H, dims=("t", "A_o")),
        elementwise("C", T, H, dims=("t", "A_o")),
        residual_add("D", T, H, ("t", "A_o")),
    )
    edges = (
        Edge("A", "B", "x", tensor_bytes=nbytes),
        Edge("A", "C", "x", tensor_bytes=nbytes),
        Edge("B", "D", "x", tensor_bytes=nbytes),
        Edge("C", "D", "r", tensor_bytes=nbytes),
    )
    wrap = Edge("D", "A", "a", dim_map=(("t", "t"), ("A_o", "h")), tensor_bytes=nbytes)
    return KernelGraph("diamond_layer", kernels, edges, boundary=(wrap,))


@pytest.fixture(scope="module")
def problem():
    system = small_system(num_chips=2, sram_bytes=2e5)
    p = tp2_problem(
        diamond_layer(), system, dataflow=True, overlap=True, max_configs=4, tiling_points=3
    )
    # the fixture is only a test of wrap edges if the boundary conversion costs something
    # under some pair of shardings (build_problem drops an all-zero wrap edge)
    wraps = [e for e in p.edges if e.wrap]
    assert len(wraps) == 1 and any(c > 0 for row in wraps[0].conv for c in row)
    return p


def test_ideals_ignore_the_wrap_edge(problem) -> None:
    # By hand: the down-sets of A < {B, C} < D are {}, {A}, {A,B}, {A,C}, {A,B,C}, all.
    names = [m.name for m in problem.kernels]
    bit = {name: 1 << names.index(name) for name in "ABCD"}
    want = {0, bit["A"], bit["A"] | bit["B"], bit["A"] | bit["C"]}
    want |= {bit["A"] | bit["B"] | bit["C"], sum(bit.values())}
    assert set(enumerate_ideals(problem, 1000)) == want


def test_topological_orders_cover_every_kernel(problem) -> None:
    for order in topological_orders(problem, 3):
        assert sorted(order) == [0, 1, 2, 3]


def test_fused_search_matches_exhaustive_enumeration(problem) -> None:
    want, _, _ = brute_force(problem)  # every legal assignment x every option
    assert math.isfinite(want)
    sol = solve_graph(problem, SolverOptions(gap=0.0, time_limit_s=0.0))
    assert sol.status == "optimal"
    assert sol.objective_s == pytest.approx(want, rel=1e-9)


def test_pins_may_put_the_layer_output_after_the_next_instances_reader(problem) -> None:
    # A in configuration 0 and D in 1 is legal (A -> B -> D); only the wrap edge D -> A
    # has its producer pinned later than its consumer, and a wrap edge orders nothing.
    names = [m.name for m in problem.kernels]
    pins = tuple(0 if n == "A" else 1 if n == "D" else -1 for n in names)
    check_pins(replace(problem, pinned_configs=pins))  # no SetupError


def _infeasible_solution() -> GraphSolution:
    return GraphSolution((), (), math.inf, math.inf, "infeasible", SearchStats())


def test_dram_is_blamed_only_when_the_problem_without_its_row_has_a_mapping(problem) -> None:
    budgeted = replace(problem, resident_bytes_per_param=2.0, resident_budget_bytes=1e6)
    free = replace(budgeted, resident_budget_bytes=math.inf)
    floor = MemoryUse()
    proof = _infeasible_solution()  # the budgeted search: infeasible, bound inf

    no_map = infeasible.phase_reason(
        budgeted, "layer", floor, proof, lambda: (free, _infeasible_solution())
    )
    assert no_map is None  # not a DRAM verdict: nothing binds, the caller reports no plan

    found = GraphSolution(((0, 1, 2, 3),), (0, 0, 0, 0), 1e-6, 1e-6, "optimal", SearchStats())
    dram = infeasible.phase_reason(budgeted, "layer", floor, proof, lambda: (free, found))
    assert dram is not None and dram.resource == "DRAM capacity"
    assert "no sharding stores its weights" in dram.text


# The same diamond as a setup file, repeated 4 times, D's output feeding the next repeat's
# A (next_instance), on two chips whose only level is tagged TP. Before the fix: "infeasible:
# DRAM capacity ... no sharding stores its weights in the 4.0 GB per layer instance".
DIAMOND_SETUP = """
dataflow_graph {
  repeat: 4
  kernels { name: "A" id: 1 type: SYSTOLIC gemm_input1_weight { outer: 1 M: 256 K: 512 N: 512 } }
  kernels { name: "B" id: 2 type: SIMD elementwise_input1 { outer: 1 M: 256 N: 512 } }
  kernels { name: "C" id: 3 type: SIMD elementwise_input1 { outer: 1 M: 256 N: 512 } }
  kernels { name: "D" id: 4 type: SIMD elementwise_input1_input2 { outer: 1 M: 256 N: 512 } }
  connections { startIdx: 1 endIdx: 2 id: 1 }
  connections { startIdx: 1 endIdx: 3 id: 2 }
  connections { startIdx: 2 endIdx: 4 id: 3 }
  connections { startIdx: 3 endIdx: 4 id: 4 }
  connections { startIdx: 4 endIdx: 1 id: 5 next_instance: true }
}
system {
  num_chip: 2
  accelerator { core: 64 systolic_width: 16 systolic_height: 16 sram_cap: 4e6 freq: 1.2 }
  memory { dram_bw: 1000 dram_cap: 1.6e10 }
  topology { kind: SWITCH degree: 2 link_bw_GBps: 100 parallelism: "TP" }
}
execution { execution_style: DATAFLOW }
"""


def test_repeated_layer_at_tp2_gets_a_plan_end_to_end(tmp_path: Path) -> None:
    scenario = tmp_path / "diamond"
    scenario.mkdir()
    (scenario / "setup.txt").write_text(DIAMOND_SETUP, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--quiet"]) == 0
    # the plan was written, so solver/verify.py's independent re-check passed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["parallelism"]["tp"] == 2
    assert summary["num_kernels"] == 4
    assert summary["status"] == "optimal"
    # dse_final.txt: rounds A=0, B=C=1, D=2 (3 per instance); D -> the next instance's A
    # (round 3 + 0) waits 3 + 0 - 2 + 1 = 2 rounds, like an edge between adjacent rounds
    final = (out / "dse_final.txt").read_text(encoding="utf-8")
    wrap = final[final.index("next_instance: true") :]
    assert "buffer_depth: 2\n" in wrap[: wrap.index("}")]


def test_a_proof_of_infeasibility_no_resource_explains_is_no_plan_not_infeasible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph search that proves infeasibility (bound inf) where every kernel fits the
    SRAM and the problem has no mapping without its DRAM row either: no resource binds, so
    the verdict is "no plan" (exit 4) naming a search defect, never "infeasible: DRAM"."""

    def proves_infeasible(problem, options) -> GraphSolution:
        return GraphSolution((), (), math.inf, math.inf, "infeasible", SearchStats())

    monkeypatch.setattr(planner, "solve_graph", proves_infeasible)
    scenario = tmp_path / "diamond"
    scenario.mkdir()
    (scenario / "setup.txt").write_text(DIAMOND_SETUP, encoding="utf-8")
    out = tmp_path / "out"

    code = main(["run", str(scenario), "--out", str(out), "--quiet"])

    stdout, stderr = capsys.readouterr()
    assert code == EXIT_NO_PLAN and "Traceback" not in stdout + stderr
    assert stderr == f"no plan: {infeasible.UNEXPLAINED_TEXT}\n"
    assert not out.exists()
