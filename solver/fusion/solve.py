"""One graph's mapping: kernel by kernel (one MILP); for DATAFLOW, the exact search over
every configuration assignment with Config[u] <= Config[v] on every edge (DESIGN.md 7):
on a chain the ideals are the prefixes, so the segment search (small graphs) or the
sharding/segmentation alternation with its proof search (large ones) is exact; on other
graphs the search over the lattice of ideals, and where that lattice is too large, the
best over several topological orders, reported as a restricted search."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from schema.errors import SetupError
from solver.by_identity import ByIdentity
from solver.check import mapping_cost
from solver.cost.problem import MappingProblem
from solver.fusion import large, tile_refine
from solver.fusion.alternate import alternate, prove_plan
from solver.fusion.demand import demand_order
from solver.fusion.first_plan import NOTE as FIRST_PLAN_NOTE
from solver.fusion.first_plan import fewest_configs, first_plan
from solver.fusion.ideal_search import IDEAL_LIMIT, IdealSearch
from solver.fusion.ideals import (
    ONE_ORDER,
    enumerate_ideals,
    is_chain_order,
    topological_orders,
)
from solver.fusion.segment_search import (
    GraphSolution,
    SearchStats,
    root_bound,
    segment_search,
    until_deadline,
)
from solver.milp.model import solve_configurations
from solver.options import VALVE_STOP, SolverOptions, deadline_of, past

ORDERS = 3  # topological orders tried when the ideal lattice is too large


def solve_graph(problem: MappingProblem, options: SolverOptions) -> GraphSolution:
    """The graph's mapping; where DATAFLOW GEMM menus were sampled, with its gap over every
    tile (solver.fusion.tile_refine). There the large-graph search's own proof over the
    sampled menus waits for the bound over every tile: that bound is the one reported, and
    when it already meets the alternation's plan the sampled proof would add nothing; when
    it does not, the sampled proof runs after it and may find a better plan."""
    deadline = deadline_of(options)
    if not (problem.dataflow and any(m.live_groups for m in problem.kernels)):
        return _solve(problem, options)
    valve_bound = partial(_valve_bound, problem)
    # with a valve, its bound is computed in the valve's window once a plan is held (the
    # refinement's first round reuses it), not after the valve tripped
    on_plan = valve_bound if math.isfinite(deadline) else None
    sol = _solve(problem, options, prove=False, on_plan=on_plan)
    rounds = options.tile_refinements
    refined = tile_refine.refine(problem, sol, options, _solve, deadline, rounds, valve_bound)
    # the alternation's one-configuration bound holds over every tile: a floor under the
    # refinement's, which a valve tripping before its relaxed searches leaves at the root
    refined = _at_least(refined, sol.stats.fused_bound_s, options.gap)
    if refined.status == "optimal" or not sol.stats.proof_deferred or past(deadline):
        return refined
    proven = _deferred_proof(problem, sol, until_deadline(options, deadline))
    return _with_sampled_proof(refined, proven, options.gap)


def _at_least(sol: GraphSolution, floor: float, gap: float) -> GraphSolution:
    """`sol` with its bound raised to `floor` where that is higher (optimal when the
    plan is then within `gap`)."""
    if not math.isfinite(sol.objective_s) or floor <= sol.bound_s:
        return sol
    bound = min(floor, sol.objective_s)
    stats = sol.stats
    if tile_refine.closed(sol.objective_s, bound, gap):
        stats = replace(stats, stop="")
        return replace(sol, bound_s=bound, status="optimal", stats=stats)
    return replace(sol, bound_s=bound)


def _valve_bound(problem: MappingProblem) -> float:
    """The root bound over every tile (tile_refine.relaxed_problem) of the segmentations of
    the order the search segments (searched_order), 0 where it searches ideals or several
    orders: the bound a valve that trips before the first relaxed search reports (the
    segmentations of the problem's own index order would bound another space)."""
    order = searched_order(problem)
    if order is None:
        return 0.0
    return root_bound(permuted(tile_refine.relaxed_problem(problem, {})[0], order))


def _deferred_proof(
    problem: MappingProblem, sol: GraphSolution, options: SolverOptions
) -> GraphSolution:
    """The proof the alternation deferred (alternate's `prove`), seeded with its plan, over
    the order it ran in: the problem's own on a chain, else the demand order (_search)."""
    order = searched_order(problem)
    assert order is not None, "a proof is deferred on the one-order search only"
    stats = SearchStats(space=sol.stats.space)  # the proof's own work (counted on top)
    seed = _in_order(sol, order)
    proven = prove_plan(permuted(problem, order), seed, options, stats, deadline_of(options))
    return _exact_objective(problem, _in_problem_order(proven, order))


def _with_sampled_proof(refined: GraphSolution, proven: GraphSolution, gap: float) -> GraphSolution:
    """The better of the refined plan and the sampled proof's, at the bound over every tile
    (the refinement's: the sampled proof's own holds over the sampled menus only)."""
    stats = replace(refined.stats, notes=list(refined.stats.notes))
    stats.milps += proven.stats.milps
    best = refined
    if proven.objective_s < refined.objective_s:
        best = replace(proven, problem=None)  # its option indices are the problem's own
    bound = min(refined.bound_s, best.objective_s)
    status = refined.status
    if tile_refine.closed(best.objective_s, bound, gap):
        status, stats.stop = "optimal", ""
    elif proven.stats.stop:  # a budget (or the valve) cut the sampled proof short: said first
        stats.stop = proven.stats.stop
    return replace(best, bound_s=bound, status=status, stats=stats)


def _solve(
    problem: MappingProblem,
    options: SolverOptions,
    prove: bool = True,
    on_plan: Callable[[], object] | None = None,
) -> GraphSolution:
    """`prove`: False lets a large graph's search return its alternation's plan at the root
    bound, its proof deferred to the caller (solve_graph). `on_plan`: work the alternation
    does once it holds a plan (alternate)."""
    sol = _search(problem, options, prove, on_plan)
    return _valve_fallback(problem, _exact_objective(problem, sol))


def _valve_fallback(problem: MappingProblem, sol: GraphSolution) -> GraphSolution:
    """A search the wall-clock valve stopped before its first plan returns the first plan
    (solver.fusion.first_plan), still marked stopped at the time limit, with the search's
    bound; any other outcome (a work budget's verdict included) is returned as it is."""
    if math.isfinite(sol.objective_s) or sol.stats.stop != VALVE_STOP:
        return sol
    found = first_plan(problem)
    if found is None:
        return sol
    configs, choice, latency_s = found
    sol.stats.notes.append(FIRST_PLAN_NOTE)
    bound_s = min(sol.bound_s, latency_s)
    return GraphSolution(configs, choice, latency_s, bound_s, "time_limit", sol.stats)


def _exact_objective(problem: MappingProblem, sol: GraphSolution) -> GraphSolution:
    """The found mapping's latency re-priced by the plain-Python evaluator: a MILP's
    objective may carry an epigraph variable not pressed down to its rows (HiGHS stops
    within its tolerances), and the plan's phase latency must equal its configurations'."""
    if not sol.configs or not math.isfinite(sol.objective_s):
        return sol
    exact, _ = mapping_cost(problem, sol.configs, sol.choice)
    if not math.isfinite(exact) or exact == sol.objective_s:
        return sol
    return replace(sol, objective_s=exact, bound_s=min(sol.bound_s, exact))


def _search(
    problem: MappingProblem,
    options: SolverOptions,
    prove: bool,
    on_plan: Callable[[], object] | None = None,
) -> GraphSolution:
    stats = SearchStats()
    n = len(problem.kernels)
    if not problem.dataflow or n == 1:
        configs = tuple((k,) for k in range(n))
        r = solve_configurations(problem, configs, options, order_free=True)
        if r.order:
            configs = tuple((k,) for k in r.order)
        stats.add(r)
        stats.stop = (r.stop or "time_limit") if r.status == "time_limit" else ""
        return GraphSolution(configs, r.choice, r.objective_s, r.bound_s, r.status, stats)
    check_pins(problem)
    if problem.pinned_configs and min(problem.pinned_configs) >= 0:  # all pinned: no search
        stats.space = "the pinned configuration of every kernel"
        by_pin = sorted(range(n), key=lambda k: (problem.pinned_configs[k], k))
        groups: dict[int, list[int]] = {}
        for k in by_pin:
            groups.setdefault(problem.pinned_configs[k], []).append(k)
        configs = tuple(tuple(g) for g in groups.values())
        r = solve_configurations(problem, configs, options)
        stats.add(r)
        return GraphSolution(configs, r.choice, r.objective_s, r.bound_s, r.status, stats)
    order = searched_order(problem)
    if order is not None and is_chain_order(problem):
        return _one_order(problem, options, stats, prove, on_plan)
    if order is None:
        ideals = enumerate_ideals(problem, IDEAL_LIMIT)
        if ideals is not None:
            sol = IdealSearch(problem, ideals, options, stats, deadline_of(options)).solve()
            if sol is not None:
                return sol
            stats.notes.append("ideal lattice too large: best over several orders")
        else:
            stats.notes.append(f"more than {IDEAL_LIMIT} ideals: best over several orders")
        return _over_orders(problem, options, stats, ORDERS)
    stats.space = ONE_ORDER
    sol = _one_order(permuted(problem, order), options, stats, prove, on_plan)
    return _in_problem_order(sol, order)


def _one_order(
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    prove: bool = True,
    on_plan: Callable[[], object] | None = None,
) -> GraphSolution:
    if problem.dataflow and fewest_configs(problem) > max(problem.max_configs, 1):
        # no choice of options fits num_config in this order (first_plan.least_sram_cut):
        # proven at once, and solver.search.infeasible says what would fit
        stats.notes.append("num_config too few for the SRAM in this order (least_sram_cut)")
        return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
    if large.applies(problem):
        sol = large.solve_large_chain(problem, options, stats, deadline_of(options))
        if sol is not None:
            return sol
    if _small(problem):
        return segment_search(problem, options, stats, deadline=deadline_of(options))
    return alternate(problem, options, stats, prove, on_plan)


EXACT_KERNELS = 20  # beyond, with several shardings, one order (a 22-kernel DAG took minutes)


def _small(problem: MappingProblem) -> bool:
    """Small enough for the direct exact search (every sharding combination in play)."""
    n = len(problem.kernels)
    return n <= EXACT_KERNELS or all(len(m.shardings) == 1 for m in problem.kernels)


def check_pins(problem: MappingProblem) -> None:
    """Pinned configurations must respect the graph: Config[u] <= Config[v] on an edge
    between two pinned kernels."""
    pins = problem.pinned_configs
    if not pins:
        return
    for e in problem.edges:
        if e.wrap:  # feeds the next instance: no order between src and dst
            continue
        a, b = pins[e.src], pins[e.dst]
        if a >= 0 and b >= 0 and a > b:
            src, dst = problem.kernels[e.src].name, problem.kernels[e.dst].name
            raise SetupError(
                f"kernel {src} is pinned to configuration {a} but its consumer {dst} to "
                f"configuration {b}: a configuration runs after the ones before it, so a "
                f"producer's configuration must be <= its consumer's (pin {dst} to >= {a})"
            )


def searched_order(problem: MappingProblem) -> list[int] | None:
    """The one kernel order `solve_graph` segments (index order for a chain or kernel by
    kernel, the demand order of a large DAG), None when it searches the ideals of the DAG or
    several orders (then a configuration need not be contiguous in any one order); _search
    branches on it, so the two cannot disagree."""
    n = len(problem.kernels)
    if not problem.dataflow or n == 1 or is_chain_order(problem):
        return list(range(n))
    if _small(problem):
        return None
    return demand_order(problem)


def permuted(problem: MappingProblem, order: list[int]) -> MappingProblem:
    """The problem with its kernels renumbered so that `order[p]` becomes kernel p; once
    per problem and order (the search, its deferred proof and the valve's bound ask)."""
    key = tuple(order)
    if key == tuple(range(len(problem.kernels))):
        return problem
    done = _PERMUTED.get(problem, dict)
    if key not in done:
        done[key] = _permuted(problem, order)
    return done[key]


_PERMUTED: ByIdentity[dict[tuple[int, ...], MappingProblem]] = ByIdentity()


def _permuted(problem: MappingProblem, order: list[int]) -> MappingProblem:
    pos = {k: p for p, k in enumerate(order)}
    # every field kept (saved, wrap, conversion group); a group's lead is its first
    # consumer in the new order
    moved = sorted(
        (replace(e, src=pos[e.src], dst=pos[e.dst]) for e in problem.edges),
        key=lambda e: (e.dst, e.src),
    )
    first: dict[int, int] = {}
    for i, e in enumerate(moved):
        if e.group >= 0:
            first.setdefault(e.group, i)
    edges = tuple(
        replace(e, lead=first[e.group] == i) if e.group >= 0 else e for i, e in enumerate(moved)
    )
    pins = tuple(problem.pinned_configs[k] for k in order) if problem.pinned_configs else ()
    kernels = tuple(problem.kernels[k] for k in order)
    return replace(problem, kernels=kernels, edges=edges, pinned_configs=pins)


def _in_problem_order(sol: GraphSolution, order: list[int]) -> GraphSolution:
    """A solution of `permuted(problem, order)` in the problem's own kernel indices."""
    if not sol.configs:
        return sol
    configs = tuple(tuple(sorted(order[p] for p in c)) for c in sol.configs)
    choice = [0] * len(order)
    for p, o in enumerate(sol.choice):
        choice[order[p]] = o
    return replace(sol, configs=configs, choice=tuple(choice))


def _in_order(sol: GraphSolution, order: list[int]) -> GraphSolution:
    """A solution in the problem's own kernel indices as one of `permuted(problem, order)`
    (the inverse of _in_problem_order)."""
    if not sol.configs:
        return sol
    pos = {k: p for p, k in enumerate(order)}
    configs = tuple(tuple(sorted(pos[k] for k in c)) for c in sol.configs)
    return replace(sol, configs=configs, choice=tuple(sol.choice[k] for k in order))


def _over_orders(
    problem: MappingProblem, options: SolverOptions, stats: SearchStats, count: int
) -> GraphSolution:
    """The best plan over the segmentations of several topological orders: exact within
    that restricted space only (stats.space says so). Each order gets the full work
    budgets (the same plan on any machine); the valve's deadline is shared."""
    orders = topological_orders(problem, count)
    stats.space = f"segmentations of {len(orders)} topological orders (not every ideal)"
    deadline = deadline_of(options)
    best: GraphSolution | None = None
    bound = math.inf
    statuses = []
    for order in orders:
        if past(deadline):
            statuses.append("time_limit")
            stats.stop = "time_limit"
            break
        sol = _one_order(permuted(problem, order), until_deadline(options, deadline), stats)
        bound = min(bound, sol.bound_s)
        statuses.append(sol.status)
        if not math.isfinite(sol.objective_s):
            continue
        if best is None or sol.objective_s < best.objective_s:
            best = replace(_in_problem_order(sol, order), bound_s=0.0, status="")
    if best is None:
        status = "infeasible" if all(s == "infeasible" for s in statuses) else "time_limit"
        return GraphSolution((), (), math.inf, bound, status, stats)
    proven = len(statuses) == len(orders) and all(s == "optimal" for s in statuses)
    bound = min(bound, best.objective_s)
    return replace(best, bound_s=bound, status="optimal" if proven else "time_limit")
