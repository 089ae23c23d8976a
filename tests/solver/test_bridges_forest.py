"""A graph that is not connected (issue 33: a DATAFLOW graph of more than 20 kernels with one
kernel that has no edge was a KeyError in solver/fusion/bridges.py). The block tree over the
bridges is a forest, one tree per connected component; every block gets an option, and the
block-by-block optimum equals one MILP over the whole graph."""

from __future__ import annotations

import math
import random
from pathlib import Path

from solver_fixtures import gemm, random_chain, small_system, tp2_problem

from generator.graph import KernelGraph
from mapshard.cli import main
from solver.check import mapping_cost
from solver.fusion.bridges import block_tree, solve_singles
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def _forest(seed: int) -> KernelGraph:
    """A 24-kernel chain and one GEMM that no edge touches (its own dims)."""
    chain = random_chain(random.Random(seed), 24)
    lonely = gemm("lonely", 32, 16, 16, a_dims=("t2", "h2"))
    return KernelGraph("forest", (*chain.kernels, lonely), chain.edges)


def test_every_component_is_a_tree_of_the_forest() -> None:
    graph = _forest(0)
    problem = tp2_problem(
        graph,
        small_system(sram_bytes=3e4, link_Bps=1e9),
        dataflow=True,
        overlap=True,
        max_configs=len(graph.kernels),
        tiling_points=4,
    )
    tree = block_tree(problem)
    assert tree is not None
    # the chain cut where both sides keep >= 8 kernels: 24 - 2 x 8 + 2 = 10 blocks, + 1
    assert len(tree.members) == 11
    assert sorted(tree.order) == list(range(11))
    roots = [b for b in tree.order if tree.parent_edge[b] == -1]
    lonely = graph.canonical_order().index("lonely")
    assert len(roots) == 2 and (lonely,) in [tree.members[b] for b in roots]


def test_forest_blocks_match_the_full_milp() -> None:
    graph = _forest(1)
    problem = tp2_problem(
        graph,
        small_system(sram_bytes=3e4, link_Bps=1e9),
        dataflow=True,
        overlap=False,
        max_configs=len(graph.kernels),
        tiling_points=4,
    )
    singles = tuple((k,) for k in range(len(problem.kernels)))
    options = SolverOptions(gap=0.0)
    full = solve_configurations(problem, singles, options)
    dp = solve_singles(problem, options)
    assert full.status == "optimal" and dp is not None and dp.status == "optimal"
    assert math.isclose(dp.objective_s, full.objective_s, rel_tol=1e-9, abs_tol=1e-15)
    again, _ = mapping_cost(problem, singles, dp.choice)
    assert again == dp.objective_s


def _setup() -> str:
    """21 kernels in a chain (a GEMM, then elementwise kernels) and one alone, DATAFLOW."""
    kernels = [
        'kernels { name: "g0" id: 1 type: SYSTOLIC '
        "gemm_input1_weight { outer: 1 M: 256 K: 256 N: 256 } }"
    ]
    links = []
    for i in range(2, 22):
        kernels.append(
            f'kernels {{ name: "e{i}" id: {i} type: SIMD '
            "elementwise_input1 { outer: 1 M: 256 N: 256 } }"
        )
        links.append(f"connections {{ startIdx: {i - 1} endIdx: {i} id: {i} }}")
    kernels.append(
        'kernels { name: "alone" id: 22 type: SYSTOLIC '
        "gemm_input1_weight { outer: 1 M: 128 K: 256 N: 128 } }"
    )
    graph = "\n  ".join(kernels + links)
    return f"""
dataflow_graph {{
  {graph}
}}
system {{
  num_chip: 2
  accelerator {{ core: 64 systolic_width: 16 systolic_height: 16 sram_cap: 4e6 freq: 1.2 }}
  memory {{ dram_bw: 1000 dram_cap: 1.6e10 }}
  topology {{ kind: SWITCH degree: 2 link_bw_GBps: 100 parallelism: "TP" }}
}}
execution {{ execution_style: DATAFLOW }}
"""


def test_dataflow_graph_with_a_lone_kernel_runs_end_to_end(tmp_path: Path) -> None:
    """Exit 0: the plan was solved and passed the independent re-check (mapshard.pipeline
    refuses to write a plan that fails it)."""
    scenario = tmp_path / "lone"
    scenario.mkdir()
    (scenario / "setup.txt").write_text(_setup(), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out), "--quiet"]) == 0
    assert "alone" in (out / "kernels.csv").read_text(encoding="utf-8")
