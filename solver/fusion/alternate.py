"""Fusion search for large graphs: alternate between shardings and segmentations.

With every kernel's sharding fixed, layout conversions are constants and the segmentation
search is exact and fast (segments priced in closed form or by tiny tiling-only MILPs).
With the segmentation fixed, one MILP re-optimises every kernel's sharding and tiling with
exact pairwise conversion costs. Alternating the two never increases the cost; it starts
from the best kernel-by-kernel sharding. The lower bound comes from the exact search over
all shardings (segments priced with the cheapest conversion of outside producers), run
with the incumbent for the time that is left, so the reported gap is proven.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from solver.cost.menus import KernelMenu, MappingProblem
from solver.fusion.segment_search import (
    GraphSolution,
    SearchStats,
    root_bound,
    segment_search,
    until_deadline,
    with_bound,
)
from solver.milp.model import solve_configurations
from solver.options import SolverOptions

ROUNDS = 4


def restrict(
    problem: MappingProblem, shardings: list[str]
) -> tuple[MappingProblem, list[list[int]]]:
    """The problem with kernel k limited to sharding `shardings[k]`; and, per kernel, the
    original index of each kept option."""
    kernels: list[KernelMenu] = []
    back: list[list[int]] = []
    for menu, s in zip(problem.kernels, shardings):
        keep = [o for o, opt in enumerate(menu.options) if opt.sharding == s]
        kernels.append(replace(menu, options=tuple(menu.options[o] for o in keep), shardings=(s,)))
        back.append(keep)
    edges = []
    for e in problem.edges:
        a = problem.kernels[e.src].shardings.index(shardings[e.src])
        b = problem.kernels[e.dst].shardings.index(shardings[e.dst])
        edges.append(replace(e, conv=((e.conv[a][b],),)))
    return replace(problem, kernels=tuple(kernels), edges=tuple(edges)), back


def _shardings(problem: MappingProblem, choice: tuple[int, ...]) -> list[str]:
    return [m.options[o].sharding for m, o in zip(problem.kernels, choice)]


def alternate(problem: MappingProblem, options: SolverOptions, stats: SearchStats) -> GraphSolution:
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit_s if options.time_limit_s > 0 else math.inf
    n = len(problem.kernels)
    singles = tuple((k,) for k in range(n))
    r = solve_configurations(problem, singles, options)
    stats.add(r)
    if r.status == "infeasible":
        return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
    root = root_bound(problem)
    # kernel by kernel is a plan only when it fits in max_configs configurations (else
    # it only seeds the shardings)
    first = r.objective_s if n <= problem.max_configs else math.inf
    best = GraphSolution(singles, r.choice, first, root, "time_limit", stats)
    sharding = _shardings(problem, r.choice)
    tried: set[tuple[str, ...]] = set()
    for _ in range(ROUNDS):
        key = tuple(sharding)
        if key in tried or time.perf_counter() > deadline:
            break
        if best.objective_s <= root * (1 + options.gap):
            return with_bound(best, root, stats, options.gap)
        tried.add(key)
        sub, back = restrict(problem, sharding)
        seg_sol = segment_search(sub, replace(options, max_paths=20), stats, deadline=deadline)
        if not math.isfinite(seg_sol.objective_s):
            break
        choice = tuple(back[k][o] for k, o in enumerate(seg_sol.choice))
        if seg_sol.objective_s < best.objective_s * (1 - 1e-12):
            best = GraphSolution(
                seg_sol.configs, choice, seg_sol.objective_s, root, "time_limit", stats
            )
        if best.objective_s <= root * (1 + options.gap):
            return with_bound(best, root, stats, options.gap)
        fixed = solve_configurations(
            problem, seg_sol.configs, until_deadline(options, deadline), start_choice=choice
        )
        stats.add(fixed)
        if fixed.objective_s < best.objective_s * (1 - 1e-12):
            best = GraphSolution(
                seg_sol.configs, fixed.choice, fixed.objective_s, root, "time_limit", stats
            )
        if not fixed.choice:
            break
        sharding = _shardings(problem, fixed.choice)
    stats.notes.append(f"alternation: {len(tried)} sharding assignment(s)")
    # Prove: the exact search over all shardings, seeded with the incumbent.
    spent = time.perf_counter() - t0
    if math.isfinite(deadline):
        budget = deadline  # the user's time limit is the budget
        stats.notes.append(f"alternation {spent:.1f} s; proof search until the time limit")
    else:
        budget = time.perf_counter() + max(5.0, spent)
        stats.notes.append(
            f"alternation {spent:.1f} s; proof search until the bound meets the "
            "incumbent or as long again"
        )
    proven = segment_search(problem, options, stats, incumbent_solution=best, deadline=budget)
    if proven.objective_s < best.objective_s:
        return proven
    return with_bound(best, proven.bound_s, stats, options.gap)
