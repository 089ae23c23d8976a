"""Lower bounds and step assembly shared by the outer search: a choice's roofline bound
(before any MILP) and its step time assembled from per-graph latencies or proven bounds."""

from __future__ import annotations

from generator.graph import Kernel, KernelKind, Workload
from hardware.system import System
from solver.cost import efficiency
from solver.cost.menus import best_compute_rate
from solver.cost.weights import StepWeights
from solver.options import ExecutionOptions
from solver.search import assemble
from solver.search.context_parallel import attention_seconds
from solver.search.parallel import Choice


def step_times(
    workload: Workload,
    choice: Choice,
    phase_latency: dict[str, float],
    system: System,
    stored: float | None = None,
    weights: StepWeights | None = None,
    hidden: float = 1.0,
) -> assemble.StepTimes:
    """The step (or request) time of a choice from its graphs' latencies (`stored`,
    `weights`, `hidden`: assemble.training_times)."""
    if workload.kind == "training":
        bw = efficiency.achieved_dram_Bps(system.chip, system.dram.bandwidth_Bps)
        attention = None
        if workload.context_parallel > 1:
            attention = attention_seconds(workload, system.chip, choice.degree("TP"))
        return assemble.training_times(
            workload,
            choice,
            phase_latency,
            bw,
            stored,
            weights,
            hidden,
            attention,
            system.chip.efficiency.strided_elementwise_elem_per_s,
            system.chip.efficiency.host_op_s,
        )
    if workload.kind == "inference":
        return assemble.inference_times(workload, choice, phase_latency)
    return assemble.graph_times(workload, phase_latency, choice.data_ranks())


def roofline_bound(
    workload: Workload, system: System, choice: Choice, execution: ExecutionOptions
) -> float:
    """Roofline bound: each kernel at the best rate any of its options reaches (the chip's
    peak at the workload's math precision times its calibrated efficiency), its weights
    read once (a graph's held batch items: once for all) at the achievable DRAM bandwidth,
    split perfectly over the TP group;
    assembled like a real plan. Never above the latency of any plan of the choice."""
    lat = roofline_phase_latency(workload, system, choice.degree("TP"), execution)
    return step_times(workload, choice, lat, system, hidden=execution.comm_hidden_share).latency_s


def roofline_phase_latency(
    workload: Workload, system: System, tp: int, execution: ExecutionOptions
) -> dict[str, float]:
    """Each phase's graph at its roofline bound over a TP group of `tp` chips (seconds, by
    phase name): the part of `roofline_bound` that depends only on the graphs and TP."""
    chip = efficiency.for_precision(system.chip, execution.math_precision)
    bw = efficiency.achieved_dram_Bps(chip, system.dram.bandwidth_Bps)
    lat = {}
    for p in workload.phases:
        compute = sum(
            k.flop / best_compute_rate(k, chip, execution.math_precision) for k in p.graph.kernels
        )
        weights = sum(bytes_read_at_least(k) for k in p.graph.kernels)
        # a weight held on chip is read once for all of a replica's batch items
        # (phase_problem.held_instances: at most all p.steps of them)
        held = p.steps if execution.dataflow and workload.kind == "graph" else 1
        lat[p.name] = max(compute, weights / held / bw) / tp
    return lat


def bytes_read_at_least(kernel: Kernel) -> float:
    """Weights and KV cache a kernel reads from DRAM at least once; an embedding lookup is a
    gather that reads only the rows it outputs; an MoE expert kernel only the experts its
    tokens reach (Kernel.expert_share: the menus' routed experts, at least that share of
    them over the TP group, solver.cost.menus._routed_sizes; 1e-9 below for their
    rounding)."""
    if kernel.kind == KernelKind.EMBEDDING:
        out = sum(kernel.operand_bytes(o) for o in kernel.outputs)
        return min(kernel.weight_bytes, out) + kernel.kv_bytes
    weights = kernel.weight_bytes
    if kernel.expert_share < 1.0 and "experts" in kernel.dim_sizes:
        weights *= kernel.expert_share * (1 - 1e-9)
    return weights + kernel.kv_bytes


def bound_of(
    workload: Workload,
    choice: Choice,
    phase_bound: dict[str, float],
    system: System,
    hidden: float = 1.0,
) -> float:
    """A choice's step time assembled from its graphs' proven bounds (0 when a graph has
    none: rates such as tokens/s divide by them); `hidden`: step_times."""
    if any(not v > 0 for v in phase_bound.values()):
        return 0.0
    return step_times(workload, choice, phase_bound, system, hidden=hidden).latency_s


def plan_warnings(
    workload: Workload, system: System, execution: ExecutionOptions
) -> tuple[str, ...]:
    """What the report must flag: matrix work at a precision the chip is not calibrated for;
    a TP comm overlap asked of a chip with no calibrated hidden share."""
    matrix = any(k.kind.uses_matrix_unit for p in workload.phases for k in p.graph.kernels)
    line = efficiency.plateau_warning(system.chip, execution.math_precision) if matrix else ""
    lines = [line] if line else []
    uncalibrated = system.chip.efficiency.tp_comm_hidden_share <= 0
    if execution.tp_comm_overlap and not execution.serialize_network:
        lines.append(
            f"execution.tp_comm_overlap has no effect under overlap {execution.overlap_name}: "
            "it hides part of a serialised network (SERIAL_NETWORK, the GPUs' default)"
        )
    elif execution.tp_comm_overlap and uncalibrated:
        lines.append(
            f"execution.tp_comm_overlap: {system.chip.name} has no calibrated "
            "efficiency.tp_comm_hidden_share, so its TP collectives stay serial"
        )
    return tuple(lines)
