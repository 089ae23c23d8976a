"""The outer search: KernelGraph phases + System -> Plan.

Outer loop over candidates (each parallel choice, times the training knobs the setup left
unset: solver.search.training_space), cheapest roofline lower bound first, so the
candidate that wins on the roofline is solved first and the best plans come early
(DESIGN.md 1). A candidate is solved only while its bound is below the best plan found
(solver.search.settle), so the result is optimal over the whole space, and the report says
how many were solved, pruned, found infeasible or not solved (solver.search.ledger).

What decides the answer is work: every graph search runs on the options' work budgets,
and the outer loop solves at most `SolverOptions.max_candidates` candidates (0 = all): the
same plan on any machine at any load. The wall-clock `time_limit_s` is a safety valve,
checked between candidates (and inside every graph search); when it trips the result says
so, and only then may the same input give another answer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from generator.graph import Workload
from hardware.system import System
from schema.errors import Interrupted, NoPlanError, SetupError
from solver import dfmodel
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import Plan, SolveStats
from solver.search import infeasible, training_space
from solver.search.degrees import outer_choices
from solver.search.exact_first import solve_graph_exact_first
from solver.search.ledger import CANDIDATE_CAP, STEP_BOUND, VALVE, Bounds, Ledger, gap_of
from solver.search.placement_pin import pinned_choices
from solver.search.plan_build import build_plan, fusion_search_text, proven_bound
from solver.search.progress import SearchProgress
from solver.search.settle import Settler
from solver.search.storage_rule import weight_rule

# the graph search the planner runs: the exact kernel-by-kernel elimination first, then
# solver.fusion.solve.solve_graph (names of this module, so a test can replace them)
solve_graph = solve_graph_exact_first
__all__ = ["search_workload", "solve_graph", "weight_rule"]


def search_workload(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    scenario: str = "",
    progress: Callable[[SearchProgress], None] | None = None,
    start_with: tuple[str, str] | None = None,
) -> Plan:
    """The best plan over every parallel choice (solver.api.solve_workload); `start_with`:
    training_space.start_with."""
    if execution.cost_model == "dfmodel":
        return dfmodel.search_dfmodel(workload, system, execution, options, scenario, progress)
    t0, cpu0 = time.perf_counter(), time.process_time()
    limits = infeasible.limits_of(workload, system)
    choices = outer_choices(
        workload, system, limits.max_tp, limits.max_pp, limits.max_dp, limits.allow_dp
    )
    choices = pinned_choices(choices, execution.placement, workload)  # plan.txt's layout
    candidates = training_space.expand(workload, choices)
    if not candidates:
        split = training_space.batch_split_problem(workload, choices)
        if split:
            raise SetupError(f"workload.llm_training: {split}")
        raise infeasible.no_layout(workload, system, limits)
    bounds = training_space.ordered_bounds(candidates, system, execution)
    bounds = training_space.start_with(bounds, start_with)
    ledger = Ledger(options)
    search_options = options.for_search()  # the valve a little early: the plan is built after
    settler = Settler(
        workload, system, execution, search_options, t0, ledger, solve_graph, weight_rule
    )
    settler.group_sizes = training_space.group_sizes(candidates)

    def report() -> None:
        if progress is not None:
            best = settler.best.times.latency_s if settler.best is not None else float("inf")
            progress(ledger.progress(bounds, best))

    ended_by, stop = _outer_loop(settler, bounds, report)
    if settler.best is None:
        _raise_no_plan(workload, system, ledger, limits, len(bounds))
    assert settler.best is not None
    if ended_by:
        ledger.close(bounds, settler.best.times.latency_s, ended_by)
    stats = _solve_stats(settler, bounds, time.perf_counter() - t0)
    first_cpu_s = settler.ledger.first_plan_at - cpu0
    stats = replace(
        stats,
        solve_cpu_s=time.process_time() - cpu0,
        first_plan_cpu_s=first_cpu_s if math.isfinite(first_cpu_s) else math.nan,
    )
    plan = build_plan(system, execution, settler.best, stats, ledger.results, scenario)
    if stop is not None:
        raise Interrupted(plan) from stop
    return plan


def _outer_loop(
    settler: Settler, bounds: Bounds, report: Callable[[], None]
) -> tuple[str, KeyboardInterrupt | None]:
    """Settle the candidates in bound order until all are settled, the candidate budget
    is spent (CANDIDATE_CAP), the valve trips (VALVE) or Ctrl-C ("interrupted", with the
    signal); returns what ended it ("" when every candidate was settled). The budget is
    checked before the valve: where it binds first, the result is the same at any load."""
    options, ledger = settler.options, settler.ledger
    solved = 0  # candidates solved or stopped before a plan (what max_candidates counts)
    report()  # from the start: the first choice and its roofline bound
    try:
        for i, (lb, _, candidate) in enumerate(bounds):
            searches = ledger.graph_solves
            settled = settler.settle(lb, candidate)
            if settled:
                solved += 1
                report()
            elif ledger.graph_solves == searches:  # pruned or rejected without a search
                continue
            if i + 1 == len(bounds):
                break
            if 0 < options.max_candidates <= solved:
                return CANDIDATE_CAP, None
            if 0 < options.time_limit_s < time.perf_counter() - settler.t0:
                return VALVE, None
    except KeyboardInterrupt as signal:  # Ctrl-C / SIGTERM: keep the best plan found
        if settler.best is None:
            raise
        return "interrupted", signal
    return "", None


def _raise_no_plan(
    workload: Workload, system: System, ledger: Ledger, limits: infeasible.Limits, total: int
) -> None:
    text = ledger.no_plan_text(total)
    if text is not None:
        raise NoPlanError(text)
    suggest = limits if workload.kind in ("training", "inference") else infeasible.any_tp(limits)
    least = training_space.least_memory(workload)  # the layout suggestion's knobs
    infeasible.raise_infeasible(ledger.infeasible_reasons, least, system, suggest)


def _solve_stats(settler: Settler, bounds: Bounds, solve_s: float) -> SolveStats:
    """The search's statistics; the gap is against the least bound of every candidate not
    pruned (the best plan's own, each solved or stopped one's, each never solved one's)."""
    best, ledger, execution = settler.best, settler.ledger, settler.execution
    assert best is not None
    proven = proven_bound(best, settler.system, execution.comm_hidden_share)
    bound_latency = ledger.bound(proven, bounds)
    gap = gap_of(best.times.latency_s, bound_latency)
    status = ledger.status()
    within = gap <= settler.options.gap * (1 + 1e-9)
    if status == "time_limit" and within:
        # a limit stopped some candidate's search short of its own proof, yet the bound
        # over the whole space meets the plan: the plan is proven optimal all the same
        status = "optimal"
    elif status == "optimal" and not within:
        # every graph search proved its plan, yet the step's terms priced outside them (the
        # optimizer update and gradient syncs at the plan's storage, pipeline and DP
        # collectives) are bounded below their price: "optimal" only within the gap asked
        status = "time_limit"
        ledger.stops.insert(0, STEP_BOUND)
    return SolveStats(
        status=status,
        objective=best.times.latency_s,
        bound=bound_latency,
        gap=gap,
        solve_time_s=solve_s,
        build_time_s=ledger.build_s,
        num_vars=ledger.num_vars,
        num_binaries=ledger.num_binaries,
        num_rows=ledger.num_rows,
        milps_solved=ledger.milps,
        choices_total=len(bounds),
        **ledger.counts(),
        fusion_search=fusion_search_text(execution.dataflow, ledger.spaces),
        stop_reason=ledger.stop_reason(status),
        search_space="; ".join(ledger.spaces) if ledger.spaces else "all",
        solver="+".join(sorted(ledger.solvers)) or settler.options.name,
    )
