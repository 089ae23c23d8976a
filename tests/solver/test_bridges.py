"""Kernel by kernel over bridges (solver/fusion/bridges.py): the bridges of small graphs
are the ones found by hand, and the block-by-block dynamic programme reaches the same
optimum as one MILP over the whole graph, on chains and on repeated DAG layers, solving
a repeated layer's MILP once."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from types import SimpleNamespace

import pytest
from solver_fixtures import random_chain, small_system, tp2_problem
from test_period import _model

from solver.check import mapping_cost
from solver.fusion import bridges as bridges_module
from solver.fusion.bridges import block_tree, bridges, solve_singles
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def _graph(n: int, pairs: list[tuple[int, int]]) -> SimpleNamespace:
    edges = [SimpleNamespace(src=a, dst=b) for a, b in pairs]
    return SimpleNamespace(kernels=[None] * n, edges=edges)


def test_bridges_by_hand() -> None:
    # 0 -> 1 -> 2, a triangle 2 -> 3 -> 4 and 2 -> 4, then 4 -> 5 and a double edge 5 -> 6:
    # removing 0-1, 1-2 or 4-5 disconnects; triangle and doubled edges never do
    g = _graph(7, [(0, 1), (1, 2), (2, 3), (3, 4), (2, 4), (4, 5), (5, 6), (5, 6)])
    assert bridges(g) == [0, 1, 5]
    # a cycle has none, a path has every edge
    assert bridges(_graph(4, [(0, 1), (1, 2), (2, 3), (0, 3)])) == []
    assert bridges(_graph(4, [(0, 1), (1, 2), (2, 3)])) == [0, 1, 2]


def _problem(graph, sram_bytes: float, overlap: bool):
    system = small_system(sram_bytes=sram_bytes, link_Bps=1e9)
    return tp2_problem(
        graph,
        system,
        dataflow=True,
        overlap=overlap,
        max_configs=len(graph.kernels),
        tiling_points=4,
    )


def _assert_same_optimum(problem) -> None:
    n = len(problem.kernels)
    singles = tuple((k,) for k in range(n))
    options = SolverOptions(gap=0.0)
    full = solve_configurations(problem, singles, options)
    assert full.status == "optimal"
    dp = solve_singles(problem, options)
    assert dp is not None and dp.status == "optimal"
    assert math.isclose(dp.objective_s, full.objective_s, rel_tol=1e-9, abs_tol=1e-15)
    # the plan it returns costs what it says, re-priced by the independent checker
    again, _ = mapping_cost(problem, singles, dp.choice)
    assert again == dp.objective_s
    # more kernels than configurations (not a plan, a seed): the programme's own total
    seed = solve_singles(replace(problem, max_configs=2), options)
    assert seed is not None and seed.choice == dp.choice
    assert math.isclose(seed.objective_s, full.objective_s, rel_tol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_chain_blocks_match_the_full_milp(seed: int) -> None:
    rng = random.Random(seed)
    problem = _problem(random_chain(rng, 24), rng.choice([4e3, 3e4]), rng.random() < 0.5)
    tree = block_tree(problem)
    # every edge of a chain is a bridge; cut where both sides have >= 8 kernels
    assert tree is not None and len(tree.members) == 24 - 2 * 8 + 2
    _assert_same_optimum(problem)


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("sram_bytes", [2e3, 3e4])
def test_repeated_layers_match_the_full_milp(overlap: bool, sram_bytes: float) -> None:
    # each layer's residual add -> output edge is a bridge
    _assert_same_optimum(_problem(_model(6), sram_bytes, overlap))


def test_a_repeated_layer_is_solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem(_model(12), 2e3, True)
    tree = block_tree(problem)
    assert tree is not None and len(tree.members) >= 10
    calls: list[int] = []
    real = bridges_module.solve_configurations

    def counting(sub, configs, options):
        calls.append(len(sub.kernels))
        return real(sub, configs, options)

    monkeypatch.setattr(bridges_module, "solve_configurations", counting)
    assert solve_singles(problem, SolverOptions(gap=0.0)) is not None
    # one MILP per block and state without reuse; the middle layers' MILPs repeat
    states = len(problem.kernels[4].shardings)
    assert len(calls) < (len(tree.members) - 1) * states / 2
