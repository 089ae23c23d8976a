"""The Plan: what the solver returns and everything downstream (reports, sweeps) reads.

Times are seconds, sizes bytes, per chip unless a name says otherwise. Frozen and plain:
no Pyomo object survives past `solver.plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hardware.calibration import Calibration

#: the parts of a row's time, in the order tables show them
SPLIT_PARTS = ("overhead", "compute", "memory", "network")


def latency_split(
    compute_s: float,
    memory_s: float,
    network_s: float,
    overhead_s: float,
    overlap: bool = True,
    serialize_network: bool = False,
    network_hidden: float = 0.0,
    floor_s: float = 0.0,
) -> tuple[float, float, float, float]:
    """The seconds (overhead, compute work, memory, network) each resource adds to a row's
    latency under solver/cost/latency.py's rule (`compute_s` includes `overhead_s` and
    `floor_s`, the launch-rate floor's excess over the work): a term hidden under a longer
    one adds nothing, so the parts sum to the latency and the largest names what to shrink
    (the row's bound label, `bound_of`). Launch time and the floor count as overhead."""
    busy = max(compute_s - overhead_s, 0.0)
    floor = min(max(floor_s, 0.0), busy)

    def parts(keep: float) -> tuple[float, float]:  # (overhead, work) of the busy part kept
        return overhead_s + floor * keep, (busy - floor) * keep

    if serialize_network:  # overhead + max(busy, M) + N, the shorter of the last two hidden h
        x = max(busy, memory_s)
        keep_x, keep_n = (
            (1.0, 1.0 - network_hidden) if x >= network_s else (1.0 - network_hidden, 1.0)
        )
        if busy >= memory_s:
            return (*parts(keep_x), 0.0, network_s * keep_n)
        return overhead_s, 0.0, memory_s * keep_x, network_s * keep_n
    if not overlap:
        return (*parts(1.0), memory_s, network_s)
    if compute_s >= memory_s and compute_s >= network_s:
        return (*parts(1.0), 0.0, 0.0)
    return (0.0, 0.0, memory_s, 0.0) if memory_s >= network_s else (0.0, 0.0, 0.0, network_s)


def bound_of(split: tuple[float, float, float, float]) -> str:
    """The label of a `latency_split`: its largest part (work before overhead on a tie)."""
    order = (1, 2, 3, 0)  # compute, memory, network, overhead
    return SPLIT_PARTS[max(order, key=lambda i: (split[i], -order.index(i)))]


def plan_rule(overlap: str) -> tuple[bool, bool]:
    """(overlap, serialize_network) of a Plan's `overlap` text ("" = perfect)."""
    return overlap != "none", overlap == "serial_network"


@dataclass(frozen=True)
class KernelPlan:
    phase: str
    name: str
    kind: str
    kernel_class: str
    pass_: str
    dims: tuple[tuple[str, int], ...]
    flop: float  # whole kernel, one graph instance (all chips together)
    weight_bytes: float  # whole kernel
    activation_bytes: float
    kv_bytes: float
    sharding: str  # split loop dim ("none" = replicated); "+rs" = reduce-scatter output
    tile: str  # chosen tiling family and tile sizes
    config: int  # configuration index within the phase
    compute_s: float  # one instance, per chip
    memory_s: float
    network_s: float  # own collective + layout conversions of its inputs
    dram_bytes: float  # DRAM traffic per chip, one instance
    network_bytes: float  # bytes each chip sends, one instance
    sram_bytes: float  # on-chip buffer used
    bound: str  # "compute" | "memory" | "network" | "overhead" (fixed per-kernel time)
    collective: str = ""  # e.g. "all_reduce 12.6 MB over tp"
    energy_J: float = 0.0  # one instance, all chips
    # where compute_s comes from: "measured:trtllm-1.3.0rc20 gemm bf16, interpolated",
    # "fitted plateau", "peak, uncalibrated", ... (solver.cost.kernel_times)
    time_source: str = ""
    # the fixed per-kernel launch time inside compute_s (the chip's kernel_overhead_s)
    overhead_s: float = 0.0
    # the launch-rate floor's excess over the work, inside compute_s (kernel_min_time_us)
    floor_s: float = 0.0


@dataclass(frozen=True)
class ConfigPlan:
    phase: str
    index: int
    kernels: tuple[str, ...]
    compute_s: float
    memory_s: float
    network_s: float
    latency_s: float  # max of the three (overlap) or their sum
    sram_bytes: float
    bound: str
    overhead_s: float = 0.0  # its kernels' launch times, inside compute_s
    floor_s: float = 0.0  # its kernels' launch-rate floors' excess, inside compute_s


@dataclass(frozen=True)
class PhasePlan:
    name: str
    role: str
    count: int  # graph instances per step (layers)
    steps: int  # sequential repetitions (decode steps)
    latency_s: float  # one instance of the graph
    lower_bound_s: float  # roofline bound of one instance
    configs: tuple[ConfigPlan, ...]
    kernels: tuple[KernelPlan, ...]


@dataclass(frozen=True)
class SolveStats:
    status: str  # "optimal" | "time_limit" | "infeasible"
    objective: float
    bound: float
    gap: float
    solve_time_s: float
    build_time_s: float = 0.0
    # CPU seconds (this process) of the search, and until its first plan (nan: not
    # measured); timing.json's, like the wall-clock times
    solve_cpu_s: float = math.nan
    first_plan_cpu_s: float = math.nan
    num_vars: int = 0
    num_binaries: int = 0
    num_rows: int = 0
    milps_solved: int = 0
    choices_total: int = 0
    choices_solved: int = 0
    choices_pruned: int = 0
    choices_infeasible: int = 0
    # stopped by a work budget or the wall-clock valve before solved (ChoiceResult
    # "not_solved"): their bounds are in `bound` and `gap`
    choices_not_solved: int = 0
    solver: str = "highs"
    fusion_search: str = ""
    # why the search ended: "proof" (optimal), "time_limit" (the wall-clock valve, the
    # only stop that may differ between runs), a work budget (the same on every machine:
    # "path_cap", "price_cap", "node_limit", "candidate_cap", SolverOptions), "memory_split"
    # (the DRAM split among graphs not proven: solver.search.dram_split), or "unexplained"
    # (a layout's graph search found no mapping that no resource explains: skipped), or
    # "step_bound" (every graph proven, the step's terms outside them not within the gap),
    # "split_over_capacity" (a DRAM split the memory check rejected: skipped), or
    # "tile_menus" / "tile_bound" (sampled tile menus whose bound over every tile did not
    # meet the plan: solver.fusion.tile_refine)
    stop_reason: str = "proof"
    # "all": every assignment with Config[u] <= Config[v]; else the restricted space a
    # graph's fusion search covered (status and gap hold within it only)
    search_space: str = "all"


@dataclass(frozen=True)
class MemoryUse:
    """Per-chip DRAM footprint of the plan, bytes."""

    weights: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    activations: float = 0.0
    kv_cache: float = 0.0
    capacity: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache


@dataclass(frozen=True)
class ChoiceResult:
    """One outer choice (parallel degrees and their placement) and what became of it."""

    parallelism: dict[str, int]
    placement: str
    lower_bound_s: float
    latency_s: float | None  # None when pruned or infeasible
    status: str  # "solved" | "pruned" | "infeasible" | "not_solved" (solver.search.ledger)
    reason: str = ""
    # the training knobs this candidate pinned, when the outer search chose them
    # ("micro-batch 2, recompute selective, ZeRO-1, interleave 2"; solver.search.training_space)
    knobs: str = ""
    # DRAM per chip, bytes: a solved candidate's plan footprint; any other's floor (every
    # parameter split over TP x PP, activations and KV at their least); None when unknown
    memory_per_chip_bytes: float | None = None


@dataclass(frozen=True)
class Plan:
    scenario: str
    workload_kind: str
    num_chips: int
    parallelism: dict[str, int]  # tp, pp, dp, ep, cp
    placement: dict[str, str]  # parallelism -> levels it spans, e.g. "nvswitch:8"
    phases: tuple[PhasePlan, ...]
    latency_s: float  # the objective (iteration time, or request latency)
    stats: SolveStats
    memory: MemoryUse
    workload_flop: float  # per step (iteration / request / graph run)
    peak_flops_per_chip: float
    flops_utilization: float
    system_cost: float
    system_power_W: float
    energy_J: float = 0.0
    iteration_time_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    num_params: int = 0
    num_active_params: int = 0
    micro_batches: int = 1
    pipeline_bubble_s: float = 0.0
    dp_allreduce_s: float = 0.0
    optimizer_s: float = 0.0
    pp_transfer_s: float = 0.0
    time_breakdown: dict[str, float] = field(default_factory=dict)
    choices: tuple[ChoiceResult, ...] = ()
    warnings: tuple[str, ...] = ()
    # what the chip's efficiency model rests on (hardware.calibration); None for a plan
    # built without a resolved system
    chip_calibration: Calibration | None = None
    chip: str = ""  # the library name of the chip the plan runs on ("" = not resolved)
    # overlap of compute, memory and network the plan assumed ("perfect", "serial_network",
    # "none"; setup.proto OverlapMode, from the setup or the chip's calibrated default)
    overlap: str = ""
    # share of each kernel's collective hidden under its work (Execution.tp_comm_overlap
    # with the chip's calibrated share; 0 = none)
    network_hidden_share: float = 0.0
    # share of a step-level collective run beside compute (DP buckets, pipeline and CP ring
    # transfers) hidden under it (ExecutionOptions.comm_hidden_share; 1 = perfect)
    comm_hidden_share: float = 1.0
    # whose equations priced the plan: "native" or "dfmodel" (--cost-model)
    cost_model: str = "native"
    # on a DFModel input priced natively: (term, native s, DFModel s) per step where the two
    # models differ (solver/compare_models.py)
    model_differences: tuple[tuple[str, float, float], ...] = ()
    # ... and System Cost / Power where DFModel's formulas give another number
    cost_differences: tuple[tuple[str, float, float], ...] = ()
    # training: the micro-batch, recompute mode, ZeRO stage and interleaving depth the plan
    # runs, and which of them the outer search chose ("searched"); empty otherwise
    training: dict[str, object] = field(default_factory=dict)
    # what the workload is, for a reader (generator.graph.Workload.label; "" = workload_kind)
    workload_label: str = ""

    def kernels(self) -> list[KernelPlan]:
        return [k for p in self.phases for k in p.kernels]
