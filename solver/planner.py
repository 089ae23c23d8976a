"""solver.plan: KernelGraph phases + System -> Plan.

Outer loop over parallel choices ordered by a roofline lower bound (DESIGN.md 1): a choice
is solved only while its bound is below the best plan found, so the result is optimal over
the whole space, and the report says how many choices were solved and pruned.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from generator.graph import KernelGraph, Workload
from hardware.system import System
from mapshard.errors import InfeasibleError, NoPlanError
from solver import assemble
from solver.fusion import GraphSolution, solve_graph
from solver.menus import MappingProblem, build_problem
from solver.options import ExecutionOptions, SolverOptions
from solver.parallel import Choice, enumerate_choices, spans_key
from solver.plan import ChoiceResult, Plan, SolveStats
from solver.report_plan import build_phase_plans, energy_of, workload_flop


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
) -> Plan:
    t0 = time.perf_counter()
    choices = _choices(workload, system)
    if not choices:
        shape = ", ".join(f"{lv.name}:{lv.degree or '?'}" for lv in system.network)
        raise InfeasibleError(
            "chip count",
            f"no parallel layout of {system.num_chips} chips fits the topology levels ({shape})",
            "make the level degrees multiply to num_chip",
        )
    bounds = [(_lower_bound(workload, system, c, execution), i, c) for i, c in enumerate(choices)]
    bounds.sort(key=lambda t: (t[0], t[1]))
    cache: dict[tuple, tuple[MappingProblem, GraphSolution]] = {}
    best: _Solved | None = None
    results: list[ChoiceResult] = []
    infeasible_reasons: list[tuple[float, str, str]] = []
    milps = 0
    stats_acc = {"vars": 0, "bins": 0, "rows": 0, "build": 0.0}
    statuses: list[str] = []
    for lb, _, choice in bounds:
        deg = {k.lower(): v for k, v in choice.degrees}
        if best is not None and lb >= best.times.latency_s * (1 - 1e-9):
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "pruned"))
            continue
        memory = assemble.memory_use(workload, choice, system.dram.capacity_bytes)
        if memory.total > memory.capacity * (1 + 1e-9):
            reason = (
                f"needs {memory.total / 1e9:.1f} GB per chip "
                f"(weights {memory.weights / 1e9:.1f}, gradients+optimizer "
                f"{(memory.gradients + memory.optimizer) / 1e9:.1f}, activations "
                f"{memory.activations / 1e9:.1f}, KV {memory.kv_cache / 1e9:.1f}), "
                f"DRAM holds {memory.capacity / 1e9:.1f} GB"
            )
            infeasible_reasons.append((memory.total / memory.capacity, reason, choice.describe()))
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "infeasible", reason))
            continue
        solutions = {}
        phase_latency = {}
        failed = ""
        for phase in workload.phases:
            key = (id(phase.graph), choice.degree("TP"), spans_key(choice.spans))
            if key not in cache:
                problem = _problem(phase.graph, system, choice, execution)
                remaining = _remaining(options, t0)
                sol = solve_graph(problem, remaining)
                milps += sol.stats.milps
                stats_acc["vars"] = max(stats_acc["vars"], sol.stats.num_vars)
                stats_acc["bins"] = max(stats_acc["bins"], sol.stats.num_binaries)
                stats_acc["rows"] = max(stats_acc["rows"], sol.stats.num_rows)
                stats_acc["build"] += sol.stats.build_s
                cache[key] = (problem, sol)
            problem, sol = cache[key]
            if sol.status == "infeasible":
                failed = _sram_reason(problem, phase.name)
                break
            statuses.append(sol.status)
            solutions[phase.name] = (problem, sol)
            phase_latency[phase.name] = sol.objective_s
        if failed:
            infeasible_reasons.append((math.inf, failed, choice.describe()))
            results.append(ChoiceResult(deg, choice.describe(), lb, None, "infeasible", failed))
            continue
        times = _times(workload, choice, phase_latency, system)
        results.append(ChoiceResult(deg, choice.describe(), lb, times.latency_s, "solved"))
        if best is None or times.latency_s < best.times.latency_s:
            best = _Solved(choice, times, solutions, memory)
        if options.time_limit_s > 0 and time.perf_counter() - t0 > options.time_limit_s:
            statuses.append("time_limit")
            break
    if best is None:
        _raise_infeasible(infeasible_reasons, workload, system)
    assert best is not None
    solve_s = time.perf_counter() - t0
    status = "optimal" if all(s == "optimal" for s in statuses) else "time_limit"
    # the bound: every pruned choice's bound >= best; for solved ones, the proven bounds
    bound_latency = _proven_bound(workload, best, system)
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


def _choices(workload: Workload, system: System) -> list[Choice]:
    layers = max((p.count for p in workload.phases if p.role == "layer"), default=1)
    if workload.kind == "training":
        max_dp = max(1, workload.global_batch // max(workload.micro_batch, 1))
        return enumerate_choices(system, max_tp=64, max_pp=layers, max_dp=max_dp)
    if workload.kind == "inference":
        return enumerate_choices(system, max_tp=64, max_pp=layers, max_dp=1, allow_dp=False)
    # distributed kernels (HPL, FFT, DLRM, GEMM, explicit graphs): one group of all chips
    return enumerate_choices(system, max_tp=system.num_chips, max_pp=1, max_dp=1, allow_dp=False)


def _problem(
    graph: KernelGraph, system: System, choice: Choice, execution: ExecutionOptions
) -> MappingProblem:
    spans = {name.lower(): span for name, span in choice.spans}
    return build_problem(
        graph,
        system.chip,
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


def _proven_bound(workload: Workload, best: _Solved, system: System) -> float:
    lat = {name: sol.bound_s for name, (_, sol) in best.solutions.items()}
    return min(_times(workload, best.choice, lat, system).latency_s, best.times.latency_s)


def _sram_reason(problem: MappingProblem, phase: str) -> str:
    worst = max(problem.kernels, key=lambda m: min(o.buffer_bytes for o in m.options))
    need = min(o.buffer_bytes for o in worst.options)
    return (
        f"phase {phase}: kernel {worst.name} needs at least {need / 2**20:.2f} MiB of "
        f"on-chip buffer, SRAM holds {problem.sram_bytes / 2**20:.2f} MiB"
    )


def _raise_infeasible(reasons, workload: Workload, system: System) -> None:
    if not reasons:
        raise NoPlanError("no parallel choice could be solved within the time limit")
    ratio, reason, where = min(reasons, key=lambda r: r[0])
    if "SRAM" in reason:
        raise InfeasibleError("SRAM", reason, "use a chip with more on-chip SRAM")
    need = math.ceil(ratio) if math.isfinite(ratio) else 0
    suggestion = (
        f"needs about {need}x the per-chip DRAM: ≥ {need}x more chips in TP·PP, "
        "or more memory per chip"
        if need > 1
        else ""
    )
    raise InfeasibleError("DRAM capacity", f"best layout ({where}) {reason}", suggestion)


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
