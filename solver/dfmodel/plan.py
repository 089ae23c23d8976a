"""The Plan of a `--cost-model dfmodel` run: DFModel's step, System Cost/Power and DRAM use
(solver/dfmodel/search.py finds the step; this writes it in the common Plan)."""

from __future__ import annotations

import time
from collections.abc import Callable

import solver.dfmodel.model as dm
from generator.graph import Workload
from hardware.system import System
from schema.errors import InfeasibleError
from solver.dfmodel.branch_search import search_dlrm, search_hpl
from solver.dfmodel.fft_search import search_fft
from solver.dfmodel.search import DFStep, checked_util, search_choices
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import ChoiceResult, MemoryUse, Plan, SolveStats
from solver.report_plan import build_phase_plans, workload_flop
from solver.verify import dfmodel_sram_row


def search_dfmodel(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    scenario: str = "",
    progress: Callable | None = None,
) -> Plan:
    """The best plan under DFModel's equations (solver.api.solve_workload with
    execution.cost_model "dfmodel")."""
    t0 = time.perf_counter()
    branch = execution.dfmodel.branch
    if execution.fft_copies > 0:  # DFModel's FFT branch: one fixed layout
        util = checked_util(workload, system)
        best, failed, lower = search_fft(workload, system, execution, options, util)
    elif branch in ("dlrm", "hpl"):  # DFModel's DLRM / HPL branches: one fixed layout
        util = checked_util(workload, system)
        search = search_dlrm if branch == "dlrm" else search_hpl
        best, failed, lower = search(workload, system, execution, options, util)
    else:
        best, failed, lower = search_choices(workload, system, execution, options)
    if best is None:
        why = "; ".join(f"{c.describe()}: {r}" for c, r in failed) or "no parallel choice"
        raise InfeasibleError("dfmodel", f"no plan under DFModel's equations: {why}")
    results = [
        ChoiceResult(_degrees(c), c.describe(), 0.0, None, "infeasible", r) for c, r in failed
    ]
    results.append(
        ChoiceResult(_degrees(best.choice), best.choice.describe(), 0.0, best.latency_s, "solved")
    )
    sol = best.solution
    bound = min(best.lower_latency_s, lower)
    if sol.status != "optimal" and sol.objective_s > 0:
        bound = min(bound, best.latency_s * sol.bound_s / sol.objective_s)
    gap = max(0.0, 1 - bound / best.latency_s) if best.latency_s > 0 else 0.0
    gap = 0.0 if gap < 1e-12 else gap  # rounding of the two sums, not a gap
    stats = SolveStats(
        status=sol.status,
        objective=best.latency_s,
        bound=bound,
        gap=gap,
        solve_time_s=time.perf_counter() - t0,
        milps_solved=sol.stats.milps,
        choices_total=len(results),
        choices_solved=1,
        choices_infeasible=len(failed),
        fusion_search="DFModel's equations (--cost-model dfmodel): " + (sol.stats.space or "all"),
        stop_reason="proof" if sol.status == "optimal" else "time_limit",
        search_space=sol.stats.space or "all",
    )
    return _plan(workload, system, execution, best, stats, tuple(results), scenario)


def _streamed_flop(workload: Workload, flop: float) -> float:
    """DFModel's Workload FLOP (its statistics block): every kernel by its type, SIMD
    M x K x N and SYSTOLIC 2 M x K x N (also an element-wise kernel typed SYSTOLIC), x its
    num_input; `flop` (MapShard's count x instances per step) scaled to that count."""
    kernels = workload.phases[0].graph.kernels
    once = sum(k.flop for k in kernels)
    theirs = 0.0
    for k in kernels:
        d = dm.dims_of(k)
        stream = k.dfmodel_extra.num_input if k.dfmodel_extra is not None else 0
        theirs += dm.flop_per_tile(d, (d.M, d.K, d.N)) * max(stream, 1)
    return flop * theirs / once if once > 0 and theirs > 0 else flop


def _degrees(choice) -> dict[str, int]:
    return {k.lower(): v for k, v in choice.degrees}


def _plan(workload, system, execution, best: DFStep, stats, results, scenario) -> Plan:
    phase = workload.phases[0]
    phases = build_phase_plans(workload, {phase.name: (best.problem, best.solution)}, system)
    shape = [lv.degree for lv in best.choice.levels]
    cost, power = dm.system_cost_power(system, shape, best.num_copy)
    flop = _streamed_flop(workload, workload_flop(workload, best.choice))
    peak = system.chip.peak(execution.math_precision)
    util = flop / (best.latency_s * system.num_chips * peak) if best.latency_s > 0 else 0.0
    bubble = best.latency_s - best.p2p_s - best.config_sum_s * best.repeat
    placement = {
        name.lower(): "x".join(f"{lv.name}:{p}" for lv, p in span)
        for name, span in best.choice.spans
        if span
    }
    warnings = ()
    if best.lower_latency_s < best.latency_s * (1 - 1e-9):
        warnings = (
            "DFModel charges a producer once per consumer in another configuration; the "
            "search charged it once for all of them, so its optimum "
            f"{best.lower_latency_s:.6g} s is a lower bound of DFModel's and this plan "
            f"({best.latency_s:.6g} s, priced DFModel's way) is within {stats.gap:.2%} of it",
        )
    warnings += _sram_warning(phases, system, execution, workload)
    kernels = len(phase.graph.kernels)
    if execution.dataflow and kernels > 1 and execution.config_budget(kernels) == kernels:
        warnings += (
            f"num_config {execution.num_config or '(unset)'} allows one configuration per "
            f"kernel of the {kernels}: DFModel then runs the graph kernel by kernel "
            "(Config[i] = i, pinned configurations not kept); a smaller num_config lets "
            "it fuse",
        )
    if execution.dfmodel.pmu > 0:
        warnings += (
            f"DFModel prices this chip (pmu {execution.dfmodel.pmu}) with its PMU "
            "place-and-route rows instead of an SRAM row: reproduced, except that a weight "
            "kernel's out-edges are bounded by their own size where DFModel reads another "
            "edge's (an indexing slip; solver/dfmodel/pmu.py)",
        )
    return Plan(
        scenario=scenario,
        workload_kind=workload.kind,
        workload_label=workload.label,
        num_chips=system.num_chips,
        parallelism=_degrees(best.choice),
        placement=placement,
        phases=phases,
        latency_s=best.latency_s,
        stats=stats,
        memory=MemoryUse(
            weights=best.dram_weights_bytes,
            activations=best.dram_activations_bytes,
            # DFModel's second DRAM (memory.second_dram_cap) adds to the first's
            capacity=system.dram.capacity_bytes + execution.dfmodel.second_dram_cap,
        ),
        workload_flop=flop,
        peak_flops_per_chip=peak,
        flops_utilization=util,
        system_cost=cost,
        system_power_W=power,
        iteration_time_s=best.latency_s if workload.kind == "training" else None,
        num_params=workload.model.num_params if workload.model else 0,
        num_active_params=workload.model.num_active_params if workload.model else 0,
        micro_batches=best.micro_batches,
        pipeline_bubble_s=max(bubble, 0.0),
        pp_transfer_s=best.p2p_s,
        time_breakdown={
            "configurations x layers x batches": best.latency_s - best.p2p_s - max(bubble, 0.0),
            "pipeline bubble": max(bubble, 0.0),
            "pp transfer": best.p2p_s,
        },
        choices=results,
        warnings=warnings,
        cost_model="dfmodel",
        chip=system.chip.name,
    )


def _sram_warning(
    phases, system: System, execution: ExecutionOptions, workload: Workload
) -> tuple[str, ...]:
    """Where DFModel's equations have no SRAM capacity row (dfmodel_sram_row: graphs other
    than an LLM's, PMU chips), say so when the buffers overflow."""
    most = max((c.sram_bytes for ph in phases for c in ph.configs), default=0.0)
    if dfmodel_sram_row(execution, workload) or most <= system.chip.sram_bytes * (1 + 1e-9):
        return ()
    return (
        "DFModel's equations have no SRAM capacity row here: a configuration's buffers "
        f"({most:,.0f} B) exceed the chip's SRAM ({system.chip.sram_bytes:,.0f} B); DFModel's "
        "figure assumes they fit",
    )
