"""DFModel's price of a set of configurations: every edge between two of them written at
its producer and read at its consumer (its D matrix), written as the common
MappingProblem and priced by solver/check.py (shared by solver/dfmodel/search.py
and lane_search.py)."""

from __future__ import annotations

import math

import solver.dfmodel.problem as dp
from generator.graph import KernelGraph
from solver.check import mapping_cost
from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution


def exact_price(
    graph: KernelGraph,
    costs: list[dp.KernelCost],
    c: dp.StageTwo,
    configs: list[list[int]],
    found: GraphSolution,
) -> tuple[MappingProblem, GraphSolution, float]:
    """The found configurations (kernel indices) priced with DFModel's own rule: every edge
    between two configurations is cut, so it is written at its producer and read at its
    consumer (DFModel's D matrix). The search's objective, which charges a producer once
    for all its consumers elsewhere, is a lower bound of that price."""
    if not math.isfinite(found.objective_s) or not configs:
        return dp.stage_two_problem(graph, costs, [], c, 1), found, math.inf
    config_of = {k: ci for ci, cf in enumerate(configs) for k in cf}
    names = {k.name: i for i, k in enumerate(graph.kernels)}
    cut = frozenset(
        (e.src, e.dst) for e in graph.edges if config_of[names[e.src]] != config_of[names[e.dst]]
    )
    flat = [k for cf in configs for k in cf]
    problem = dp.stage_two_problem(graph, costs, flat, c, len(configs), (), cut)
    pos = {k: p for p, k in enumerate(flat)}
    local = tuple(tuple(sorted(pos[k] for k in cf)) for cf in configs)
    choice = (0,) * len(flat)
    total, _ = mapping_cost(problem, local, choice)
    sol = GraphSolution(local, choice, total, found.bound_s, found.status, found.stats)
    return problem, sol, min(found.objective_s, total)
