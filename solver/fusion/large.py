"""Chains too long for the exact segment search, whose tables grow as n^2 (10,000 kernels
would need gigabytes and minutes before a first plan). For a pure knapsack problem (one
sharding per kernel), the fewest configurations that fit the SRAM come from a greedy sweep:
each configuration is extended while some tiling still fits, which is provably the least
count, since a segment's least SRAM only grows with its length. If that count exceeds
num_config the graph is infeasible; otherwise those configurations are mapped by one MILP.
The search space is then that one segmentation, and the result says so."""

from __future__ import annotations

import math

import numpy as np

from solver.cost.problem import MappingProblem
from solver.fusion.segment_price import KnapsackPricer
from solver.fusion.segment_search import GraphSolution, SearchStats, until_deadline
from solver.milp.model import solve_configurations
from solver.options import VALVE_STOP, SolverOptions, past

LARGE_CHAIN = 3000  # kernels: beyond, the exact segment search's n^2 tables are too large


def applies(problem: MappingProblem) -> bool:
    pins = problem.pinned_configs
    pinned = bool(pins) and any(p >= 0 for p in pins)
    single = all(len(m.shardings) == 1 for m in problem.kernels)
    return len(problem.kernels) > LARGE_CHAIN and single and not pinned


def fewest_segments(
    problem: MappingProblem, deadline: float = math.inf
) -> list[tuple[int, int]] | None:
    """The longest SRAM-feasible segments, left to right ([] when a kernel fits alone
    nowhere; None when a Pareto front grows past the pricer's limit or the sweep passes
    the valve's `deadline`, perf_counter seconds)."""
    pricer = KnapsackPricer(problem)
    n = len(problem.kernels)
    out = np.full(n + 1, math.inf)
    segments, i = [], 0
    while i < n:
        out[:] = math.inf
        if not pricer.row(i, n, out, deadline=deadline):
            return None
        fits = np.nonzero(np.isfinite(out[i + 1 :]))[0]
        if not len(fits):
            return []
        j = i + 1 + int(fits[-1])
        segments.append((i, j))
        i = j
    return segments


def solve_large_chain(
    problem: MappingProblem, options: SolverOptions, stats: SearchStats, deadline: float
) -> GraphSolution | None:
    """The mapping over the fewest configurations, or None when the greedy sweep cannot
    run (a front too large: the caller's search takes over). Past the valve's `deadline`
    (perf_counter seconds) it stops with no plan, stop reason the valve's."""
    segments = fewest_segments(problem, deadline)
    if past(deadline):
        stats.stop = VALVE_STOP
        return GraphSolution((), (), math.inf, 0.0, "time_limit", stats)
    if segments is None:
        return None
    n = len(problem.kernels)
    stats.space = (
        f"the fewest configurations that fit ({len(segments)}; a {n}-kernel chain is beyond "
        f"the exact search's {LARGE_CHAIN})"
    )
    if not segments or len(segments) > problem.max_configs:
        stats.notes.append(
            f"{len(segments) or 'no'} configurations at the least fit the SRAM; "
            f"num_config allows {problem.max_configs}"
        )
        return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
    configs = tuple(tuple(range(i, j)) for i, j in segments)
    r = solve_configurations(problem, configs, until_deadline(options, deadline))
    stats.add(r)
    if r.status == "time_limit":
        stats.stop = r.stop or "time_limit"
    return GraphSolution(configs, r.choice, r.objective_s, r.bound_s, r.status, stats)
