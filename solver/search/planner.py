"""solver.plan: KernelGraph phases + System -> Plan.

Outer loop over parallel choices ordered by a roofline lower bound (DESIGN.md 1): a choice
is solved only while its bound is below the best plan found, so the result is optimal over
the whole space, and the report says how many choices were solved and pruned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from generator.graph import KernelGraph, Workload
from hardware.system import System
from schema.errors import NoPlanError
from solver.cost import efficiency
from solver.cost.menus import MappingProblem, build_problem
from solver.fusion.segment_search import GraphSolution, solve_graph
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import ChoiceResult, Plan, SolveStats
from solver.report_plan import build_phase_plans, energy_of, workload_flop
from solver.search import assemble, infeasible
from solver.search.parallel import Choice, enumerate_choices, spans_key


@dataclass(frozen=True)
class SearchProgress:
    """Where the outer search stands, after each parallel choice it settles."""

    choices_done: int
    choices_total: int
    best_latency_s: float  # inf until a first plan
    bound_s: float  # least latency any unsettled or solved choice could still reach

    def describe(self) -> str:
        text = f"choice {self.choices_done}/{self.choices_total}"
        if math.isfinite(self.best_latency_s):
            gap = max(0.0, 1 - self.bound_s / self.best_latency_s) if self.best_latency_s else 0
            text += f", best {self.best_latency_s:.4g} s, bound {self.bound_s:.4g} s"
            text += f" (gap {gap:.1%})"
        return text


@dataclass
class _Solved:
    choice: Choice
    times: assemble.StepTimes
    solutions: dict[str, tuple[MappingProblem, GraphSolution]]
    memory: object


def plan(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    scenario: str = "",
    progress: Callable[[SearchProgress], None] | None = None,
) -> Plan:
    t0 = time.perf_counter()
    limits = _limits(workload, system)
    choices = enumerate_choices(
        system, limits.max_tp, limits.max_pp, limits.max_dp, allow_dp=limits.allow_dp
    )
    if not choices:
        raise infeasible.no_layout(workload, system, limits)
    bounds = [(_lower_bound(workload, system, c, execution), i, c) for i, c in enumerate(choices)]
    bounds.sort(key=lambda t: (t[0], t[1]))
    cache: dict[tuple, tuple[MappingProblem, GraphSolution]] = {}
    best: _Solved | None = None
    results: list[ChoiceResult] = []
    infeasible_reasons: list[tuple[infeasible.Reason, str]] = []
    milps = 0
    stats_acc = {"vars": 0, "bins": 0, "rows": 0, "build": 0.0}
    statuses: list[str] = []
    # proven lower bounds of the choices not pruned by the best plan, and how many of them
    # stopped at the time limit before a first plan
    open_bounds: list[float] = []
    no_plan = 0
    for lb, _, choice in bounds:
        deg = {k.lower(): v for k, v in choice.degrees}
        if best is not None and lb >= best.times.latency_s * (1 - 1e-9):
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "pruned"))
            continue
        memory = assemble.memory_use(workload, choice, system.dram.capacity_bytes)
        if memory.total > memory.capacity * (1 + 1e-9):
            why = infeasible.dram_reason(memory)
            infeasible_reasons.append((why, choice.describe()))
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "infeasible", why.text))
            continue
        solutions = {}
        phase_latency: dict[str, float] = {}
        phase_bound: dict[str, float] = {}
        failed: infeasible.Reason | None = None
        for phase in workload.phases:
            key = (id(phase.graph), choice.degree("TP"), spans_key(choice.spans))
            if key not in cache:
                problem = _problem(phase.graph, system, choice, execution)
                failed = infeasible.untileable(problem, phase.graph, phase.name)
                if failed is not None:
                    break
                remaining = _remaining(options, t0)
                sol = solve_graph(problem, remaining)
                milps += sol.stats.milps
                stats_acc["vars"] = max(stats_acc["vars"], sol.stats.num_vars)
                stats_acc["bins"] = max(stats_acc["bins"], sol.stats.num_binaries)
                stats_acc["rows"] = max(stats_acc["rows"], sol.stats.num_rows)
                stats_acc["build"] += sol.stats.build_s
                cache[key] = (problem, sol)
            problem, sol = cache[key]
            phase_bound[phase.name] = sol.bound_s if sol.bound_s < math.inf else 0.0
            if sol.status == "infeasible":
                # None: a mapping fits the SRAM, so the search stopped before finding it
                failed = infeasible.sram_reason(problem, phase.name)
                if failed is None:
                    phase_latency[phase.name] = math.inf
                    continue
                break
            statuses.append(sol.status)
            solutions[phase.name] = (problem, sol)
            phase_latency[phase.name] = sol.objective_s
        if failed is not None:
            infeasible_reasons.append((failed, choice.describe()))
            results.append(
                ChoiceResult(deg, choice.describe(), lb, None, "infeasible", failed.text)
            )
            continue
        if all(math.isfinite(v) for v in phase_latency.values()):
            times = _times(workload, choice, phase_latency, system)
            results.append(ChoiceResult(deg, choice.describe(), lb, times.latency_s, "solved"))
            open_bounds.append(_bound_of(workload, choice, phase_bound, system))
            if best is None or times.latency_s < best.times.latency_s:
                best = _Solved(choice, times, solutions, memory)
        else:  # stopped at the time limit without a plan: only its bounds are known
            no_plan += 1
            statuses.append("time_limit")
            results.append(
                ChoiceResult(deg, choice.describe(), lb, None, "pruned", "no plan in time")
            )
            open_bounds.append(max(lb, _bound_of(workload, choice, phase_bound, system)))
        if progress is not None:
            unsolved = [b for b, _, _ in bounds[len(results) :]]
            progress(
                SearchProgress(
                    len(results),
                    len(bounds),
                    best.times.latency_s if best is not None else math.inf,
                    min([*open_bounds, *unsolved], default=0.0),
                )
            )
        if options.time_limit_s > 0 and time.perf_counter() - t0 > options.time_limit_s:
            statuses.append("time_limit")
            break
    if best is None:
        if no_plan or not infeasible_reasons:
            raise NoPlanError(
                f"{no_plan} of {len(bounds)} parallel choices stopped at the time limit "
                f"({options.time_limit_s:g} s) before a first plan; raise "
                "solver.time_limit_s (or --time-limit)"
            )
        suggest = limits if workload.kind in ("training", "inference") else _any_tp(limits)
        infeasible.raise_infeasible(infeasible_reasons, workload, system, suggest)
    assert best is not None
    solve_s = time.perf_counter() - t0
    status = "optimal" if all(s == "optimal" for s in statuses) else "time_limit"
    # The proven bound: pruned choices have a roofline bound >= the best plan; every other
    # choice contributes its proven bound, and a choice never reached (time limit) its
    # roofline bound.
    unexplored = [lb for lb, _, _ in bounds[len(results) :]]
    bound_latency = min([_proven_bound(workload, best, system), *open_bounds, *unexplored])
    gap = max(0.0, (best.times.latency_s - bound_latency) / best.times.latency_s)
    if status == "time_limit" and len(results) < len(bounds):
        for lb, _, choice in bounds[len(results) :]:
            deg = {k.lower(): v for k, v in choice.degrees}
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "pruned", "time limit"))
    stats = SolveStats(
        status=status,
        objective=best.times.latency_s,
        bound=bound_latency,
        gap=gap,
        solve_time_s=solve_s,
        build_time_s=stats_acc["build"],
        num_vars=stats_acc["vars"],
        num_binaries=stats_acc["bins"],
        num_rows=stats_acc["rows"],
        milps_solved=milps,
        choices_total=len(bounds),
        choices_solved=sum(r.status == "solved" for r in results),
        choices_pruned=sum(r.status == "pruned" for r in results),
        choices_infeasible=sum(r.status == "infeasible" for r in results),
        fusion_search=(
            "segments of a topological order (lazy shortest path + exact pricing)"
            if execution.dataflow
            else "kernel-by-kernel"
        ),
    )
    return _build_plan(workload, system, execution, best, stats, results, scenario)


def _limits(workload: Workload, system: System) -> infeasible.Limits:
    """The degrees searched: TP up to 64 and one pipeline stage per layer at most for LLMs
    (DP only in training); distributed kernels (HPL, FFT, DLRM, GEMM, explicit graphs)
    spread over one group of all chips."""
    layers = max((p.count for p in workload.phases if p.role == "layer"), default=1)
    if workload.kind == "training":
        max_dp = max(1, workload.global_batch // max(workload.micro_batch, 1))
        return infeasible.Limits(max_tp=64, max_pp=layers, max_dp=max_dp, allow_dp=True)
    if workload.kind == "inference":
        return infeasible.Limits(max_tp=64, max_pp=layers, max_dp=1, allow_dp=False)
    return infeasible.Limits(max_tp=system.num_chips, max_pp=1, max_dp=1, allow_dp=False)


def _any_tp(limits: infeasible.Limits) -> infeasible.Limits:
    """A distributed kernel can spread over any number of chips: for suggesting more."""
    return replace(limits, max_tp=2**20)


def _problem(
    graph: KernelGraph, system: System, choice: Choice, execution: ExecutionOptions
) -> MappingProblem:
    spans = {name.lower(): span for name, span in choice.spans}
    return build_problem(
        graph,
        efficiency.for_precision(system.chip, execution.math_precision),
        system.dram.bandwidth_Bps,
        choice.degree("TP"),
        choice.span("TP"),
        spans,
        execution.math_precision,
        execution.dataflow,
        execution.overlap,
        execution.num_config,
        serialize_network=execution.serialize_network,
    )


def _remaining(options: SolverOptions, t0: float) -> SolverOptions:
    from dataclasses import replace

    if options.time_limit_s <= 0:
        return options
    left = max(1.0, options.time_limit_s - (time.perf_counter() - t0))
    return replace(options, time_limit_s=left)


def _times(
    workload: Workload, choice: Choice, phase_latency: dict[str, float], system: System
) -> assemble.StepTimes:
    if workload.kind == "training":
        return assemble.training_times(workload, choice, phase_latency, system.dram.bandwidth_Bps)
    if workload.kind == "inference":
        return assemble.inference_times(workload, choice, phase_latency)
    return assemble.graph_times(workload, phase_latency)


def _lower_bound(
    workload: Workload, system: System, choice: Choice, execution: ExecutionOptions
) -> float:
    """Roofline bound: each graph at peak FLOP/s and its weights read once at full DRAM
    bandwidth, split perfectly over the TP group; assembled like a real plan."""
    tp = choice.degree("TP")
    peak = max(system.chip.peak_flops.values())
    peak = max(peak, system.chip.vector_flops)
    bw = system.dram.bandwidth_Bps
    lat = {}
    for p in workload.phases:
        flop = p.graph.flop / tp
        weights = sum(k.weight_bytes + k.kv_bytes for k in p.graph.kernels) / tp
        lat[p.name] = max(flop / peak, weights / bw)
    return _times(workload, choice, lat, system).latency_s


def _bound_of(
    workload: Workload, choice: Choice, phase_bound: dict[str, float], system: System
) -> float:
    """A choice's step time assembled from its graphs' proven bounds (0 when a graph has
    none: rates such as tokens/s divide by them)."""
    if any(not v > 0 for v in phase_bound.values()):
        return 0.0
    return _times(workload, choice, phase_bound, system).latency_s


def _proven_bound(workload: Workload, best: _Solved, system: System) -> float:
    lat = {name: sol.bound_s for name, (_, sol) in best.solutions.items()}
    return min(_bound_of(workload, best.choice, lat, system), best.times.latency_s)


def _build_plan(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    best: _Solved,
    stats: SolveStats,
    results: list[ChoiceResult],
    scenario: str,
) -> Plan:
    from hardware.cost import system_cost, system_power

    phases = build_phase_plans(workload, best.solutions, system)
    levels = [lv.degree for lv in best.choice.levels]
    flop = workload_flop(workload, best.choice)
    peak = system.chip.peak(execution.math_precision)
    t = best.times
    util = flop / (t.latency_s * system.num_chips * peak) if t.latency_s > 0 else 0.0
    deg = {k.lower(): v for k, v in best.choice.degrees}
    if any(k.sharding.startswith("experts") for p in phases for k in p.kernels):
        deg["ep"] = deg.get("tp", 1)
    placement = {
        name.lower(): "x".join(f"{lv.name}:{p}" for lv, p in span)
        for name, span in best.choice.spans
        if span
    }
    model = workload.model
    return Plan(
        scenario=scenario,
        workload_kind=workload.kind,
        num_chips=system.num_chips,
        parallelism=deg,
        placement=placement,
        phases=phases,
        latency_s=t.latency_s,
        stats=stats,
        memory=best.memory,
        workload_flop=flop,
        peak_flops_per_chip=peak,
        flops_utilization=util,
        system_cost=system_cost(system, levels),
        system_power_W=system_power(system, levels),
        energy_J=energy_of(phases, workload, system, best.choice),
        iteration_time_s=t.iteration_time_s,
        ttft_s=t.ttft_s,
        tpot_s=t.tpot_s,
        tokens_per_s=t.tokens_per_s,
        num_params=model.num_params if model else int(assemble.param_count(workload)),
        num_active_params=(
            model.num_active_params if model else int(assemble.param_count(workload))
        ),
        micro_batches=t.micro_batches,
        pipeline_bubble_s=t.bubble_s,
        dp_allreduce_s=t.dp_allreduce_s,
        optimizer_s=t.optimizer_s,
        pp_transfer_s=t.pp_transfer_s,
        time_breakdown=dict(t.breakdown),
        choices=tuple(results),
    )
