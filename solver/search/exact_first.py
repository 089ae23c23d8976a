"""A graph's solve with the exact kernel-by-kernel elimination tried before the MILP.

Why: a kernel-by-kernel graph is one small MILP per outer choice (20-80 ms in HiGHS), and
a sweep solves thousands; solver.milp.exact_kbk proves the same optimum in about a
millisecond wherever its conditions hold and says None elsewhere, and then the MILP runs
as before. Only for the default solver (HiGHS) without a node limit: a named solver or a
node limit asks for that solver's own run.
"""

from __future__ import annotations

import time

from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import solve_graph
from solver.milp.exact_kbk import solve_kbk
from solver.options import SolverOptions

EXACT_SOLVER = "exact-kbk"  # SolveStats.solver of a plan whose graphs it all proved
EXACT_NOTE = "proven by the exact kernel-by-kernel elimination (solver/milp/exact_kbk.py)"


def solve_graph_exact_first(problem: MappingProblem, options: SolverOptions) -> GraphSolution:
    """solver.fusion.solve.solve_graph, answered by solve_kbk where it applies."""
    kbk = not problem.dataflow or len(problem.kernels) == 1
    if kbk and options.name == "highs" and options.node_limit <= 0:
        t0 = time.perf_counter()
        found = solve_kbk(problem)
        if found is not None:
            stats = SearchStats(solve_s=time.perf_counter() - t0, notes=[EXACT_NOTE])
            configs = tuple((k,) for k in found.order)
            obj = found.objective_s
            return GraphSolution(configs, found.choice, obj, obj, "optimal", stats)
    return solve_graph(problem, options)


def solved_by(sol: GraphSolution, milp_solver: str) -> str:
    """The solver that proved a graph's solution: EXACT_SOLVER, else the MILP solver the
    options name (HiGHS by default)."""
    return EXACT_SOLVER if EXACT_NOTE in sol.stats.notes else milp_solver
