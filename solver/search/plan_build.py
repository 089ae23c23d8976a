"""Plan assembly: the best candidate of the outer search -> the Plan the rest of the program
reads (phase plans, totals, energy, cost, the training knobs chosen)."""

from __future__ import annotations

from dataclasses import dataclass

from generator.graph import Workload
from hardware.cost import system_cost, system_power
from hardware.system import System
from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution
from solver.options import ExecutionOptions
from solver.plan import ChoiceResult, MemoryUse, Plan, SolveStats
from solver.report_plan import build_phase_plans, energy_of, workload_flop
from solver.search import assemble
from solver.search.bounds import bound_of, plan_warnings
from solver.search.expert_group import expert_parallel_degree
from solver.search.parallel import Choice
from solver.search.storage_rule import param_count
from solver.search.training_space import knob_values


@dataclass
class Solved:
    """The best candidate so far: its pinned workload, parallel choice, step times, each
    phase's (problem, solution), its memory footprint and the proven lower bound on its
    choice's step (the DRAM split's: it knows what storing less costs the step)."""

    workload: Workload
    choice: Choice
    times: assemble.StepTimes
    solutions: dict[str, tuple[MappingProblem, GraphSolution]]
    memory: MemoryUse
    bound_s: float = 0.0


def build_plan(
    system: System,
    execution: ExecutionOptions,
    best: Solved,
    stats: SolveStats,
    results: list[ChoiceResult],
    scenario: str,
) -> Plan:
    """The Plan of the best candidate, for its own (pinned) workload."""
    workload = best.workload
    # the phases as one data-parallel replica runs them (its share of a graph's batch items)
    replica = assemble.one_replica(workload, best.choice.data_ranks())
    phases = build_phase_plans(replica, best.solutions, system)
    levels = [lv.degree for lv in best.choice.levels]
    flop = workload_flop(workload, best.choice)
    peak = system.chip.peak(execution.math_precision)
    t = best.times
    util = flop / (t.latency_s * system.num_chips * peak) if t.latency_s > 0 else 0.0
    deg = {k.lower(): v for k, v in best.choice.degrees}
    experts_on_tp = any(k.sharding.startswith("experts") for p in phases for k in p.kernels)
    if workload.kind == "training" and workload.model and workload.model.num_experts > 0:
        # Megatron's EP (the chips of one EP group) and ETP (solver.search.expert_group)
        deg["ep"], deg["etp"] = expert_parallel_degree(workload, best.choice)
    elif deg.get("ep", 1) <= 1 and experts_on_tp:
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
        workload_label=workload.label,
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
        energy_J=energy_of(phases, replica, system, best.choice),
        iteration_time_s=t.iteration_time_s,
        ttft_s=t.ttft_s,
        tpot_s=t.tpot_s,
        tokens_per_s=t.tokens_per_s,
        num_params=model.num_params if model else int(param_count(workload)),
        num_active_params=(model.num_active_params if model else int(param_count(workload))),
        micro_batches=t.micro_batches,
        pipeline_bubble_s=t.bubble_s,
        dp_allreduce_s=t.dp_allreduce_s,
        optimizer_s=t.optimizer_s,
        pp_transfer_s=t.pp_transfer_s,
        time_breakdown=dict(t.breakdown),
        choices=tuple(results),
        chip_calibration=system.chip.calibration,
        chip=system.chip.name,
        warnings=plan_warnings(workload, system, execution),
        overlap=execution.overlap_name,
        network_hidden_share=execution.network_hidden_share,
        comm_hidden_share=execution.comm_hidden_share,
        training=knob_values(workload, best.choice.degree("TP")),
    )


def proven_bound(best: Solved, system: System, hidden: float = 1.0) -> float:
    """The best plan's proven lower bound: its graphs' bounds assembled at the least
    storage, or the DRAM split's own bound when tighter, never above its latency
    (`hidden`: bounds.step_times)."""
    lat = {name: sol.bound_s for name, (_, sol) in best.solutions.items()}
    graphs = bound_of(best.workload, best.choice, lat, system, hidden)
    return min(max(graphs, best.bound_s), best.times.latency_s)


def fusion_search_text(dataflow: bool, spaces: list[str]) -> str:
    """The fusion search in words for the report (`spaces`: restricted spaces searched)."""
    if not dataflow:
        return "kernel-by-kernel"
    text = (
        "every configuration assignment with Config[u] <= Config[v] (paths in the "
        "lattice of ideals; lazy shortest path + exact pricing)"
    )
    if spaces:
        text += "; restricted, optimal only within: " + "; ".join(spaces)
    return text
