"""Turn solved graphs into the plain Plan records (per kernel, per configuration)."""

from __future__ import annotations

from collections.abc import Sequence

from generator.graph import Pass, Phase, Workload
from hardware.system import System
from solver.check import ConfigCost, config_costs, kernel_memory_bytes
from solver.cost.problem import MappingProblem, config_rank
from solver.fusion.segment_search import GraphSolution
from solver.plan import ConfigPlan, KernelPlan, PhasePlan, bound_of, latency_split
from solver.search.parallel import Choice


def bound_by(
    compute: float,
    memory: float,
    network: float,
    overhead: float = 0.0,
    serialize_network: bool = False,
    overlap: bool = True,
    network_hidden: float = 0.0,
    floor: float = 0.0,
) -> str:
    """The binding resource under the latency rule in force (solver/cost/latency.py): the
    largest of the seconds each resource adds to the latency (solver.plan.latency_split,
    the columns the reports show), with `compute` counting the launch overhead; "overhead"
    when the fixed per-kernel launch time outweighs the work, so a norm held at the floor
    is not called compute-bound."""
    split = latency_split(
        compute, memory, network, overhead, overlap, serialize_network, network_hidden, floor
    )
    return bound_of(split)


def build_phase_plans(
    workload: Workload, solutions: dict[str, tuple[MappingProblem, GraphSolution]], system: System
) -> tuple[PhasePlan, ...]:
    out = []
    for phase in workload.phases:
        problem, sol = solutions[phase.name]
        configs, kernels = [], []
        sharding = [m.sharding_index(o) for m, o in zip(problem.kernels, sol.choice)]
        rank = config_rank(len(problem.kernels), sol.configs)
        charge = dict(zip(map(id, problem.edges), problem.edge_charges(sharding, rank)))
        costs = config_costs(problem, sol.configs, sol.choice)  # linear: not per config
        for c, (seg, cost) in enumerate(zip(sol.configs, costs, strict=True)):
            configs.append(_config_plan(phase, problem, c, seg, cost, sol.choice))
            members = set(seg)  # once per configuration (a 20,000-kernel one: not n^2)
            for k in seg:
                kernels.append(_kernel_plan(phase, problem, sol, c, k, members, charge, system))
        lower = sum(max(min(o.compute_s for o in m.options), 0.0) for m in problem.kernels)
        out.append(
            PhasePlan(
                phase.name,
                phase.role,
                phase.count,
                phase.steps,
                sol.objective_s,
                min(lower, sol.objective_s),
                tuple(configs),
                tuple(kernels),
            )
        )
    return tuple(out)


def _config_plan(
    phase: Phase,
    problem: MappingProblem,
    c: int,
    seg: Sequence[int],
    cost: ConfigCost,
    choice: Sequence[int],
) -> ConfigPlan:
    overhead = sum(problem.kernels[k].overhead_s for k in seg)
    floor = sum(problem.kernels[k].options[choice[k]].floor_s for k in seg)
    return ConfigPlan(
        phase.name,
        c,
        tuple(problem.kernels[k].name for k in seg),
        cost.compute_s,
        cost.memory_s,
        cost.network_s,
        cost.latency_s,
        cost.sram_bytes,
        _bound(problem, cost.compute_s, cost.memory_s, cost.network_s, overhead, floor),
        overhead,
        floor,
    )


def _bound(
    problem: MappingProblem,
    compute: float,
    memory: float,
    network: float,
    overhead: float,
    floor: float = 0.0,
) -> str:
    """`bound_by` under the problem's latency rule."""
    return bound_by(
        compute,
        memory,
        network,
        overhead,
        problem.serialize_network,
        problem.overlap,
        problem.network_hidden_share,
        floor,
    )


def _kernel_plan(
    phase: Phase,
    problem: MappingProblem,
    sol: GraphSolution,
    c: int,
    k: int,
    members: set[int],
    charge: dict[int, float],
    system: System,
) -> KernelPlan:
    menu = problem.kernels[k]
    o = sol.choice[k]
    opt = menu.options[o]
    kernel = phase.graph.kernel(menu.name)
    dram = kernel_memory_bytes(problem, k, o, members)
    conv = sum(charge[id(e)] for e in problem.conv_in_edges(k))
    compute = opt.compute_s + menu.overhead_s
    memory = dram / problem.dram_bandwidth_Bps
    network = opt.network_s + conv
    return KernelPlan(
        phase=phase.name,
        name=menu.name,
        kind=kernel.kind.value,
        kernel_class=kernel.kernel_class,
        pass_=kernel.pass_.value,
        dims=kernel.dims,
        flop=kernel.flop,
        weight_bytes=kernel.weight_bytes,
        activation_bytes=kernel.activation_bytes,
        kv_bytes=kernel.kv_bytes,
        sharding=opt.sharding,
        tile=opt.tile,
        config=c,
        compute_s=compute,
        memory_s=memory,
        network_s=network,
        dram_bytes=dram,
        network_bytes=opt.network_bytes,
        sram_bytes=opt.buffer_bytes,
        bound=_bound(problem, compute, memory, network, menu.overhead_s, opt.floor_s),
        collective=opt.collective + ("; layout conversion" if conv > 0 else ""),
        energy_J=_kernel_energy(system, opt.flop_per_chip, dram, opt.network_bytes),
        time_source=opt.time_source,
        overhead_s=menu.overhead_s,
        floor_s=opt.floor_s,
    )


def _kernel_energy(system: System, flop: float, dram_bytes: float, net_bytes: float) -> float:
    c = system.cost
    return (
        flop * c.energy_per_flop_J
        + dram_bytes * c.energy_per_dram_byte_J
        + net_bytes * c.energy_per_link_byte_J
    )


def workload_flop(workload: Workload, choice: Choice) -> float:
    """Model FLOP per step, recomputation excluded: DFModel's "Workload FLOP" (every
    kernel's FLOPs, i.e. 2*M*K*N per GEMM plus the element-wise work, x outer x layers x
    global batch: 3.85072240461978e19 for its GPT-3 1T example); the workload's own count
    when its graphs hold one process's share (Workload.useful_flop: HPL)."""
    if workload.useful_flop > 0:
        return workload.useful_flop
    per_phase = {}
    for p in workload.phases:
        per_phase[p.name] = sum(k.flop for k in p.graph.kernels if k.pass_ != Pass.RECOMPUTE)
    if workload.kind == "training":
        instances = max(workload.instances_per_micro_batch, 1)
        # a graph holds one CP rank's share of its micro-batch's sequences
        sequences = workload.global_batch / max(workload.micro_batch, 1) * instances
        sequences *= max(workload.context_parallel, 1)
        return sum(per_phase[p.name] * p.count for p in workload.phases) * sequences
    # inference: the graphs are one replica's (Workload.replicas), each replica runs them
    replicas = max(workload.replicas, 1)
    return replicas * sum(per_phase[p.name] * p.count * p.steps for p in workload.phases)


def energy_of(
    phases: tuple[PhasePlan, ...], workload: Workload, system: System, choice: Choice
) -> float:
    """Energy per step, all chips: per-kernel energy (per chip of its TP group) x instances
    x chips. With pipeline parallelism each stage runs 1/PP of the layer instances (and one
    stage the head), so the instances of a phase are spread over PP stages: the average chip
    runs count x steps / PP of them (training: x micro-batches per DP rank)."""
    per_chip = 0.0
    pp = choice.degree("PP")
    repeat = {p.name: p.count * p.steps / pp for p in workload.phases}
    if workload.kind == "training":
        mb = workload.global_batch / max(workload.micro_batch, 1) / choice.data_ranks()
        mb *= max(workload.instances_per_micro_batch, 1)
        repeat = {p.name: p.count * mb / pp for p in workload.phases}
    for ph in phases:
        per_chip += sum(k.energy_J for k in ph.kernels) * repeat[ph.name]
    return per_chip * system.num_chips
