"""Fusion search for large graphs: alternate between shardings and segmentations.

With every kernel's sharding fixed, layout conversions are constants and the segmentation
search is exact and fast (segments priced in closed form or by tiny tiling-only MILPs).
With the segmentation fixed, one MILP re-optimises every kernel's sharding and tiling with
exact pairwise conversion costs. Alternating the two never increases the cost; it starts
from the best kernel-by-kernel sharding. The lower bound comes from the exact search over
all shardings (segments priced with the cheapest conversion of outside producers), run
with the incumbent on its work budgets, so the reported gap is proven.

Every budget is work (ROUNDS, ALTERNATION_NODES, the restricted search's ALTERNATION_PATHS,
the options' max_paths and max_priced): the same plan on every machine. The valve's
deadline (the options' time limit) is checked between steps and said when it trips.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from solver.cost.problem import KernelMenu, MappingProblem
from solver.fusion.bridges import solve_singles
from solver.fusion.compose import compose
from solver.fusion.first_plan import first_plan
from solver.fusion.fused_bound import fused_bound
from solver.fusion.segment_search import (
    GraphSolution,
    SearchStats,
    root_bound,
    segment_search,
    until_deadline,
    with_bound,
)
from solver.milp.exact_kbk import solve_kbk
from solver.milp.model import MilpResult, solve_configurations
from solver.options import SolverOptions, deadline_of, past

ROUNDS = 4  # sharding assignments tried at most
ALTERNATION_NODES = 500  # branch-and-bound nodes of one alternation step's MILP
ALTERNATION_PATHS = 20  # segmentations checked by one round's restricted segment search
# from this size on, a repeated layer's composed plan comes first (the restricted segment
# search of a first round found no plan in a minute on a 96-layer model, 3,936 kernels)
COMPOSE_KERNELS = 100


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
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    deadline: float,
    on_plan: Callable[[], object] | None = None,
) -> tuple[GraphSolution, list[str]] | None:
    """The plan the alternation starts from (its bound the root bound) and the shardings
    of its first round; None when the problem is infeasible. More kernels than
    configurations: the greedy first plan at once (solver.fusion.first_plan). A model's
    repeated layer: one window solved once and copied (an upper bound only,
    solver.fusion.compose), kept when it beats the greedy plan.
    Otherwise one configuration per kernel, block by block over the graph's bridges when
    it has some (the same optimum, a model's repeated layers solved once), else one MILP:
    its shardings seed the first round, and it is a plan only within num_config."""
    n = len(problem.kernels)
    greedy = _greedy_plan(problem, 0.0, stats) if n > problem.max_configs else None
    if greedy is not None:
        stats.saw_plan(greedy.objective_s)  # before the root bound: a plan first
    root = root_bound(problem)
    if root == math.inf:  # no segmentation fits even at every kernel's least SRAM
        return None
    if greedy is not None:
        greedy = replace(greedy, bound_s=root)
        if on_plan is not None:
            on_plan()
    if past(deadline):  # the valve tripped before the seed
        return _at_valve(problem, greedy, root, stats)
    if n > COMPOSE_KERNELS:
        composed = compose(problem, options, stats, deadline)
        beaten = greedy.objective_s if greedy is not None else math.inf
        if composed is not None and composed.objective_s < beaten:
            plan = GraphSolution(
                composed.configs, composed.choice, composed.objective_s, root, "time_limit", stats
            )
            return plan, _shardings(problem, composed.choice)
    if past(deadline):  # the valve tripped while composing
        return _at_valve(problem, greedy, root, stats)
    singles = tuple((k,) for k in range(n))
    exact = _exact_singles(problem, deadline)
    if exact is not None:
        singles, r = exact
        stats.solve_s += r.solve_s  # the seed's time, not a MILP's
        stats.notes.append(EXACT_SEED_NOTE)
    else:
        r = solve_singles(problem, options, deadline)
        if r is None and past(deadline):  # stopped block by block: no whole MILP after it
            return _at_valve(problem, greedy, root, stats)
        if r is None:
            # the valve's remaining time only (a safety net, said below when it trips)
            r = solve_configurations(problem, singles, until_deadline(options, deadline))
        else:
            stats.notes.append("kernel-by-kernel seed: solved block by block over bridges")
        stats.add(r)
    if greedy is not None and greedy.choice and (r.status == "infeasible" or not r.choice):
        return greedy, _shardings(problem, greedy.choice)  # a plan: not infeasible
    if r.status == "infeasible":
        return None
    if greedy is None:
        plan = GraphSolution(singles, r.choice, r.objective_s, root, "time_limit", stats)
    else:
        plan = greedy
    return plan, _shardings(problem, r.choice)


EXACT_SEED_NOTE = "kernel-by-kernel seed: the exact elimination (solver/milp/exact_kbk.py)"


def _exact_singles(
    problem: MappingProblem, deadline: float
) -> tuple[tuple[tuple[int, ...], ...], MilpResult] | None:
    """One configuration per kernel by the exact kernel-by-kernel elimination, where it
    applies (solver.milp.exact_kbk: no pinned configuration): its run order as the
    configurations and the result as a MILP's would read, the checker's cost of that plan.
    The seed MILP over thousands of kernels takes HiGHS seconds (15 CPU-s on a 2,976-kernel
    training step) and stops at its gap; the elimination is exact in about 2."""
    if problem.any_config_pinned:
        return None
    t0 = time.perf_counter()
    found = solve_kbk(problem, deadline, keep=False)  # one search's seed: nothing to keep
    if found is None:
        return None
    configs = tuple((k,) for k in found.order)
    result = MilpResult(
        "optimal", found.objective_s, 0.0, found.choice, 0, 0, 0, 0.0, time.perf_counter() - t0
    )
    return configs, result


def _at_valve(
    problem: MappingProblem, greedy: GraphSolution | None, root: float, stats: SearchStats
) -> tuple[GraphSolution, list[str]]:
    """The start when the valve trips before the seed: the greedy plan, or no plan."""
    stats.stop = "time_limit"
    if greedy is None or not greedy.choice:
        return GraphSolution((), (), math.inf, root, "time_limit", stats), []
    return greedy, _shardings(problem, greedy.choice)


def _greedy_plan(problem: MappingProblem, root: float, stats: SearchStats) -> GraphSolution:
    """The linear-time first plan (solver.fusion.first_plan) as the incumbent the search
    starts from: a plan in milliseconds, and a bound on every MILP after it."""
    found = first_plan(problem)
    if found is None:
        return GraphSolution((), (), math.inf, root, "time_limit", stats)
    configs, choice, latency_s = found
    stats.notes.append("search started from the greedy first plan (solver.fusion.first_plan)")
    return GraphSolution(configs, choice, latency_s, root, "time_limit", stats)


def alternate(
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    prove: bool = True,
    on_plan: Callable[[], object] | None = None,
) -> GraphSolution:
    """`prove`: False returns the alternation's plan at the root bound without the proof
    search (`stats.proof_deferred`): the caller bounds it another way first. `on_plan`:
    called once the greedy first plan is held, before the seed and the rounds improve it
    (solve.solve_graph computes the valve's bound there, inside the valve's window).
    The rounds run in chains of at most ROUNDS, taken in turn: from the one-configuration
    bound's shardings (solver.fusion.fused_bound: where one long configuration holds most
    kernels, the trade it makes between replicated compute and collectives) and from the
    first plan's (where the SRAM splits the graph into many configurations). Fused first:
    on the issue's grid it gave GPT x19 9% against 18%, Mixtral x13 13% against 28% at 60
    s; the first plan's first only kept synthetic_200's plan 2.5% better."""
    deadline = deadline_of(options)
    start = _first_plan(problem, options, stats, deadline, on_plan)
    if start is None:
        return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
    best, sharding = start
    stats.saw_plan(best.objective_s)
    fused = fused_bound(problem, until_deadline(options, deadline))
    root = max(best.bound_s, fused.bound_s)
    stats.fused_bound_s = fused.bound_s
    if fused.bound_s > best.bound_s:
        stats.notes.append(FUSED_NOTE)
    # the chains' next shardings, taken in turn (one round each per pass)
    chains = [list(fused.shardings), sharding] if fused.shardings else [sharding]
    tried: set[tuple[str, ...]] = set()
    for _ in range(ROUNDS):
        chains = [c for c in chains if c and tuple(c) not in tried]
        if not chains:
            break
        for c, chain_sharding in enumerate(chains):
            if past(deadline):  # the valve, not a budget: the stop says so
                stats.stop = "time_limit"
                break
            if best.objective_s <= root * (1 + options.gap):
                return with_bound(best, root, stats, options.gap)
            if tuple(chain_sharding) in tried:  # the other chain reached it this pass
                chains[c] = []
                continue
            tried.add(tuple(chain_sharding))
            best, chains[c] = _round(problem, options, stats, deadline, best, chain_sharding, root)
        if past(deadline):
            break
    if best.objective_s <= root * (1 + options.gap):
        return with_bound(best, root, stats, options.gap)
    stats.notes.append(
        f"alternation: {len(tried)} sharding assignment(s); proof search until the bound "
        "meets the incumbent or a work budget runs out"
    )
    if past(deadline):  # the valve: no proof search after it (its set-up alone is long)
        stats.stop = "time_limit"
        if not math.isfinite(best.objective_s):
            return GraphSolution((), (), math.inf, root, "time_limit", stats)
        return with_bound(best, root, stats, options.gap)
    if not prove and math.isfinite(best.objective_s):
        stats.proof_deferred = True
        return with_bound(best, root, stats, options.gap)
    proven = prove_plan(problem, best, options, stats, deadline)
    final = with_bound(proven, max(proven.bound_s, root), stats, options.gap)
    if final.status == "optimal":
        stats.stop = ""  # the fused bound closed what the proof search's budget left open
    return final


FUSED_NOTE = (
    "bound: every kernel in one configuration with the SRAM limit lifted "
    "(solver.fusion.fused_bound), above the segment bounds"
)


def _round(
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    deadline: float,
    best: GraphSolution,
    sharding: list[str],
    goal: float,
) -> tuple[GraphSolution, list[str]]:
    """One alternation round from `sharding`: the best segmentation for it, then (unless
    that plan is already within the gap of the bound `goal`) one MILP re-choosing every
    option over that segmentation. Returns the better plan and the next round's shardings
    ([] when the round found nothing to go on with)."""
    root = best.bound_s
    restricted = replace(options, max_paths=min(options.max_paths, ALTERNATION_PATHS))
    sub, back = restrict(problem, sharding)
    seg_sol = segment_search(sub, restricted, stats, deadline=deadline, heuristic=True)
    if not math.isfinite(seg_sol.objective_s):
        return best, []
    choice = tuple(back[k][o] for k, o in enumerate(seg_sol.choice))
    if seg_sol.objective_s < best.objective_s * (1 - 1e-12):
        best = GraphSolution(
            seg_sol.configs, choice, seg_sol.objective_s, root, "time_limit", stats
        )
    if best.objective_s <= goal * (1 + options.gap):
        return best, sharding  # the caller returns it as proven
    # a heuristic step (the proof is segment_search's, and the incumbent is its warm
    # start): capped in nodes, the same on every machine (HiGHS's root is not counted
    # in nodes: on a large fused menu only the valve bounds it)
    nodes = min(options.nodes, ALTERNATION_NODES)
    step = replace(until_deadline(options, deadline), node_limit=nodes)
    fixed = solve_configurations(problem, seg_sol.configs, step, start_choice=choice)
    stats.add(fixed)
    if fixed.objective_s < best.objective_s * (1 - 1e-12):
        best = GraphSolution(
            seg_sol.configs, fixed.choice, fixed.objective_s, root, "time_limit", stats
        )
    if not fixed.choice:
        return best, []
    return best, _shardings(problem, fixed.choice)


def prove_plan(
    problem: MappingProblem,
    best: GraphSolution,
    options: SolverOptions,
    stats: SearchStats,
    deadline: float,
) -> GraphSolution:
    """The exact search over all shardings, seeded with the incumbent `best` (no plan:
    inf objective): the better plan, with the bound it proves."""
    seed = best if math.isfinite(best.objective_s) else None
    proven = segment_search(problem, options, stats, incumbent_solution=seed, deadline=deadline)
    if proven.objective_s < best.objective_s:
        return proven
    if seed is None:  # no plan within num_config and the SRAM is known
        stats.stop = stats.stop or "time_limit"
        return GraphSolution((), (), math.inf, proven.bound_s, "time_limit", stats)
    return with_bound(best, proven.bound_s, stats, options.gap)
