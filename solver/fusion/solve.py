"""One graph's mapping: kernel by kernel (one MILP), the exact segment search for small
graphs, or the sharding/segmentation alternation with its proof search for large ones."""

from __future__ import annotations

from solver.cost.menus import MappingProblem
from solver.fusion.alternate import alternate
from solver.fusion.segment_search import GraphSolution, SearchStats, segment_search
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def solve_graph(problem: MappingProblem, options: SolverOptions) -> GraphSolution:
    stats = SearchStats()
    n = len(problem.kernels)
    if not problem.dataflow or n == 1:
        configs = tuple((k,) for k in range(n))
        r = solve_configurations(problem, configs, options)
        stats.add(r)
        return GraphSolution(configs, r.choice, r.objective_s, r.bound_s, r.status, stats)
    if _small(problem):
        return segment_search(problem, options, stats)
    return alternate(problem, options, stats)


def _small(problem: MappingProblem) -> bool:
    """Small enough for the direct exact search (every sharding combination in play)."""
    return len(problem.kernels) <= 10 or all(len(m.shardings) == 1 for m in problem.kernels)
