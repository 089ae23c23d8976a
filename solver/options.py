"""Solver-side options, plain dataclasses (the setup's proto is converted in mapshard)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class DFModelOptions:
    """DFModel's workload block and lane/stage hardware fields, read only by
    --cost-model dfmodel (solver/dfmodel/), but for `branch` "hpl", whose process grid the
    native model reads too (solver/search/process_grid.py); mapshard.pipeline fills it."""

    branch: str = ""  # execution's workload block: llm, dlrm, hpl, fft, mamba, ... ("" none)
    num_copy: int = 1  # dlrm / hpl / fft num_copy
    global_batch: int = 1  # dlrm global_batch_size
    table_bytes: float = 0.0  # dlrm num_table x row x emb_dim x word
    hpl_n: int = 0  # hpl matrix side
    tile_size: int = 0  # llm tile_size (0 = free)
    effective_stage: int = 0  # lane/stage pipeline depth of use_effective_stage kernels
    lane_width: int = 0  # accelerator systolic_width
    stage_width: int = 0  # accelerator systolic_height
    cores: int = 0
    freq_GHz: float = 0.0
    pmu: int = 0  # pattern memory units (0 = DFModel's SRAM row instead)
    pmu_cap: float = 0.0  # bytes per PMU
    sram_bounded: bool = True  # False: sram_cap 0, which DFModel reads as no limit
    # execution.separate_rs_ag_for_ar: an all-reduce costs a reduce-scatter + an all-gather
    separate_rs_ag_for_ar: bool = False
    # system.HBD: chips of the high-bandwidth domain (0 unset; solver/dfmodel/model.hbd_ratios)
    hbd: int = 0
    # system.memory.second_dram_cap (bytes, 0 none) and second_dram_bw (bytes/s): DFModel's
    # second DRAM, used when the first's capacity is exceeded (solver/dfmodel/search.py)
    second_dram_cap: float = 0.0
    second_dram_Bps: float = 0.0
    # DFModel's newer schema (the `overlap` enum, execution.effective_stage): its
    # num_input multiplies a configuration's II (not a kernel's cycles) and a configuration
    # with a streamed kernel runs one tile (solver/dfmodel/lane_search.py)
    newer_schema: bool = False


@dataclass(frozen=True)
class ExecutionOptions:
    dataflow: bool = False  # True: fusion into configurations is searched
    num_config: int = 0  # most configurations per graph (0 = number of kernels)
    overlap: bool = True  # compute, memory and network overlap within a configuration
    math_precision: str = "bf16"
    pin_sharding: bool = False
    pipeline_schedule: str = "1f1b"  # or "gpipe"
    # GPU kernel-by-kernel semantics: a kernel's collective runs after its compute (one
    # stream) and the launch overhead adds: L = overhead + max(compute, memory) + network
    # (less network_hidden_share of the shorter of the last two).
    serialize_network: bool = False
    # with serialize_network: the share of the shorter of a kernel's collectives and its
    # compute/memory that hides under the other (the framework overlaps its TP collectives
    # with the GEMMs, Execution.tp_comm_overlap; the chip's calibrated tp_comm_hidden_share)
    network_hidden_share: float = 0.0
    tp_comm_overlap: bool = False  # the setup asked for it (Execution.tp_comm_overlap)
    # the share of a collective the framework runs beside compute at step level (DP
    # gradient buckets and parameter gathers, interleaved pipeline and CP ring transfers)
    # that hides under it (solver.cost.latency.exposed_under): 1 = perfect; on a
    # kernel-by-kernel GPU the chip's calibrated tp_comm_hidden_share, the same contention
    comm_hidden_share: float = 1.0
    # whose equations price a mapping: "native" or "dfmodel" (solver/dfmodel/model.py)
    cost_model: str = "native"
    word_bytes: float = 2.0  # DFModel's execution.word: bytes per element
    # DFModel's FFT branch (execution.fft): its num_copy (0 = not that branch) and length
    fft_copies: int = 0
    fft_length: int = 0
    dfmodel: DFModelOptions = DFModelOptions()
    # the parallel layout pinned (Execution.placement, schema.pins syntax; "" = searched)
    placement: str = ""

    def config_budget(self, kernels: int) -> int:
        """Most configurations a graph of `kernels` kernels may use, the one reading of
        num_config: its value when fusion is searched and it is set (> 0), else one per
        kernel (unset means no limit; kernel by kernel, each kernel is its own)."""
        return self.num_config if self.dataflow and self.num_config > 0 else kernels

    @property
    def overlap_name(self) -> str:
        """The setup's OverlapMode these flags mean: perfect, serial_network or none."""
        if self.serialize_network:
            return "serial_network"
        return "perfect" if self.overlap else "none"


# Work budgets: what decides the answer, counted in work, never in seconds, so the same
# input gives the same plan on any machine at any load (DESIGN.md, machine-readable
# contract). Each default lets every shipped scenario reach a proven optimum.
NODE_LIMIT = 10_000  # branch-and-bound nodes per MILP (HiGHS mip_max_nodes)
MAX_PATHS = 200  # segmentations priced exactly per fusion search
MAX_PRICED = 500  # segments (kernel sets) priced by a MILP per fusion search
TILE_MENU_SIZE = 10  # points kept per long tile frontier (solver.cost.frontier.fusion_points)
TILE_REFINEMENTS = 8  # rounds of opening sampled tile groups (solver.fusion.tile_refine)
MIN_LEFT_S = 0.01  # a search past its valve still hands HiGHS this much (it stops at once)
# the share of time_limit_s the search itself may take (SolverOptions.for_search): building
# the plan and re-checking it after the search run inside the limit too
VALVE_SHARE = 0.95
VALVE_STOP = "time_limit"  # the stop reason of the wall-clock valve
# the stop reason each work budget gives a search it ends -> its setup field (solver {})
BUDGET_OF_STOP = {
    "node_limit": "node_limit",
    "path_cap": "max_paths",
    "price_cap": "max_priced",
    "candidate_cap": "max_candidates",
    "tile_menus": "tile_refinements",
}


@dataclass(frozen=True)
class SolverOptions:
    """How the search runs. The work budgets (node_limit, max_paths, max_priced,
    max_candidates) decide the answer; `time_limit_s` is only a safety valve on the wall
    clock: every loop checks it, and a run it stops says so (stop reason "time_limit")."""

    time_limit_s: float = 0.0  # the valve: wall seconds of the solve, VALVE_SHARE the search's
    gap: float = 1e-4
    threads: int = 1
    name: str = "highs"
    node_limit: int = 0  # nodes per MILP as the user set it (0: NODE_LIMIT)
    max_paths: int = MAX_PATHS
    max_priced: int = MAX_PRICED
    max_candidates: int = 0  # outer candidates whose graphs are solved (0 = every one)
    tile_menu_size: int = TILE_MENU_SIZE
    tile_refinements: int = TILE_REFINEMENTS

    @property
    def nodes(self) -> int:
        """The node budget of each MILP: the user's, else NODE_LIMIT."""
        return self.node_limit if self.node_limit > 0 else NODE_LIMIT

    def for_search(self) -> SolverOptions:
        """These options with the valve at VALVE_SHARE of the limit (none: as is): what
        follows the search, the plan built and re-checked, then fits in the limit."""
        if self.time_limit_s <= 0:
            return self
        return replace(self, time_limit_s=self.time_limit_s * VALVE_SHARE)

    def remaining(self, t0: float) -> SolverOptions:
        """These options with the time left of the valve since `t0` (at least MIN_LEFT_S;
        none: as is)."""
        if self.time_limit_s <= 0:
            return self
        left = max(MIN_LEFT_S, self.time_limit_s - (time.perf_counter() - t0))
        return replace(self, time_limit_s=left)


def deadline_of(options: SolverOptions) -> float:
    """perf_counter seconds at which the valve trips (inf without a time limit)."""
    if options.time_limit_s <= 0:
        return math.inf
    return time.perf_counter() + options.time_limit_s


def past(deadline: float) -> bool:
    """True once the valve's `deadline` (perf_counter seconds) has passed."""
    return time.perf_counter() > deadline
