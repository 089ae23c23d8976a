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

from solver.cost.problem import KernelMenu, MappingProblem
from solver.fusion.bridges import solve_singles
from solver.fusion.compose import compose
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


ALTERNATION_NODES = 500  # branch-and-bound nodes of one alternation step's MILP
ALTERNATION_S = 2.0  # and its seconds
# from this size on, a repeated layer's composed plan comes first (the restricted segment
# search of a first round found no plan in a minute on a 96-layer model, 3,936 kernels)
COMPOSE_KERNELS = 100
COMPOSE_SHARE = 0.5  # of the time left, for the composed plan of a repeated layer
ALTERNATION_SHARE = 0.5  # of the time limit, for the alternation's rounds after the first


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
    index = [m.shardings.index(s) for m, s in zip(problem.kernels, shardings)]
    # with the shardings fixed, each edge's charge is known (a conversion group's distinct
    # layouts on its lead edge): single-sharding edges outside any group
    edges = [
        replace(e, conv=((charge,),), group=-1, layouts=(), lead=True)
        for e, charge in zip(problem.edges, problem.edge_charges(index))
    ]
    return replace(problem, kernels=tuple(kernels), edges=tuple(edges)), back


def _shardings(problem: MappingProblem, choice: tuple[int, ...]) -> list[str]:
    return [m.options[o].sharding for m, o in zip(problem.kernels, choice)]


def _first_plan(
    problem: MappingProblem, options: SolverOptions, stats: SearchStats, deadline: float
) -> tuple[GraphSolution, list[str], bool] | None:
    """The plan the alternation starts from (its bound the root bound), the shardings of
    its first round and whether it is a composed one; None when the problem is
    infeasible. A model's repeated layer: one window solved once and copied (an upper
    bound only, solver.fusion.compose). Otherwise one configuration per kernel, block by
    block over the graph's bridges when it has some (the same optimum, a model's
    repeated layers solved once), else one MILP: its shardings seed the first round, and
    it is a plan only within num_config."""
    n = len(problem.kernels)
    root = root_bound(problem)
    if n > COMPOSE_KERNELS:
        now = time.perf_counter()
        share = now + COMPOSE_SHARE * (deadline - now)
        composed = compose(problem, options, stats, share, deadline)
        if composed is not None:
            plan = GraphSolution(
                composed.configs, composed.choice, composed.objective_s, root, "time_limit", stats
            )
            return plan, _shardings(problem, composed.choice), True
    singles = tuple((k,) for k in range(n))
    r = solve_singles(problem, options, deadline)
    if r is None:
        r = solve_configurations(problem, singles, options)
    else:
        stats.notes.append("kernel-by-kernel seed: solved block by block over bridges")
    stats.add(r)
    if r.status == "infeasible":
        return None
    if n <= problem.max_configs:
        plan = GraphSolution(singles, r.choice, r.objective_s, root, "time_limit", stats)
    else:
        plan = GraphSolution((), (), math.inf, root, "time_limit", stats)
    return plan, _shardings(problem, r.choice), False


def alternate(problem: MappingProblem, options: SolverOptions, stats: SearchStats) -> GraphSolution:
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit_s if options.time_limit_s > 0 else math.inf
    start = _first_plan(problem, options, stats, deadline)
    if start is None:
        return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
    best, sharding, composed = start
    root = best.bound_s
    tried: set[tuple[str, ...]] = set()
    # rounds after the first stop at a share of the time left, which the proof search
    # needs (a second round took 34 of layers_8's 60 s and found nothing)
    later_rounds = t0 + ALTERNATION_SHARE * (deadline - t0)
    for _ in range(ROUNDS):
        key = tuple(sharding)
        # with a composed plan in hand, every round stops at the share
        until = later_rounds if tried or composed else deadline
        if key in tried or time.perf_counter() > until:
            break
        if best.objective_s <= root * (1 + options.gap):
            return with_bound(best, root, stats, options.gap)
        sub, back = restrict(problem, sharding)
        tried.add(key)
        seg_sol = segment_search(sub, replace(options, max_paths=20), stats, deadline=until)
        if not math.isfinite(seg_sol.objective_s):
            break
        choice = tuple(back[k][o] for k, o in enumerate(seg_sol.choice))
        if seg_sol.objective_s < best.objective_s * (1 - 1e-12):
            best = GraphSolution(
                seg_sol.configs, choice, seg_sol.objective_s, root, "time_limit", stats
            )
        if best.objective_s <= root * (1 + options.gap):
            return with_bound(best, root, stats, options.gap)
        # a heuristic step (the proof is segment_search's, and the incumbent is its warm
        # start): capped in nodes and seconds so that it stays finite with no time limit
        # (HiGHS's root alone can take tens of seconds on a large fused menu)
        step = until_deadline(options, min(deadline, time.perf_counter() + ALTERNATION_S))
        step = replace(step, node_limit=step.node_limit or ALTERNATION_NODES)
        fixed = solve_configurations(problem, seg_sol.configs, step, start_choice=choice)
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
    seed = best if math.isfinite(best.objective_s) else None
    proven = segment_search(problem, options, stats, incumbent_solution=seed, deadline=budget)
    if proven.objective_s < best.objective_s:
        return proven
    if seed is None:  # no plan within num_config and the SRAM is known
        stats.stop = stats.stop or "time_limit"
        return GraphSolution((), (), math.inf, proven.bound_s, "time_limit", stats)
    return with_bound(best, proven.bound_s, stats, options.gap)
