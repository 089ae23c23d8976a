"""Graph solutions reused across the points of a sweep when the inner problem is the same.

Why: many sweep axes leave a graph's inner problem unchanged (a price, a power, a link
bandwidth at TP 1), and a worker process solves point after point. A kernel-by-kernel graph
is one MILP, and HiGHS (fixed seed, one thread, a node budget) returns the same solution
for the same model on every run. So such a solution is kept under the problem's full value
(every menu, edge, capacity and budget, compared field by field) and the work budgets that
steer the search, and handed back for an equal problem, whatever the time limit: a solve
the budgets ended is what a fresh solve returns on any machine.

Never kept: a search stopped by a limit (the wall-clock valve: not reproducible; a work
budget: kept out too, so that a stopped search is always visible as one); DATAFLOW graphs
(problems large enough that comparing them costs more than it saves); other solvers and
thread counts than HiGHS on one thread (always solved).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from solver.cost.memo import Memo
from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions

# an entry holds its problem (menus included): a kernel-by-kernel graph's is ~100 kB
SOLUTIONS = Memo(256, enabled=False)
_KEPT = ("optimal", "infeasible")
_HIGHS = ("highs", 1)  # the solver and thread count whose runs were checked to repeat


def solve_graph_memo(
    problem: MappingProblem,
    options: SolverOptions,
    solve: Callable[[MappingProblem, SolverOptions], GraphSolution] = solve_graph,
) -> GraphSolution:
    """`solve(problem, options)`, from SOLUTIONS when an equal problem finished (off by
    default: a sweep worker switches it on, `mapshard.sweeps.worker.run_batch`)."""
    if problem.dataflow or not SOLUTIONS.enabled or (options.name, options.threads) != _HIGHS:
        return solve(problem, options)
    budgets = (options.nodes, options.max_paths, options.max_priced)
    key: Hashable = (problem, options.gap, options.node_limit, *budgets)
    found = SOLUTIONS.find(key)
    if found is not None:
        return found
    sol = solve(problem, options)
    if sol.status in _KEPT and not sol.stats.stop:
        SOLUTIONS.put(key, sol)
    return sol
