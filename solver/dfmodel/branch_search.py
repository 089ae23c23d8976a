"""`--cost-model dfmodel` on DFModel's DLRM and HPL branches: one fixed layout each (DLRM:
data parallel over the chips of a copy; HPL: the copy's chips as its process grid), the
configurations searched exhaustively (solver/dfmodel/lane_search.py), the step assembled
DFModel's way (solver/dfmodel/branches.py holds the equations)."""

from __future__ import annotations

import math
from dataclasses import replace

import solver.dfmodel.branches as br
import solver.dfmodel.fft as fft
import solver.dfmodel.model as dm
import solver.dfmodel.problem as dp
from generator.graph import Workload
from hardware.system import System
from schema.errors import SetupError
from solver.dfmodel.fft_search import fft_choice
from solver.dfmodel.lane_search import lane_compute
from solver.dfmodel.search import DFStep, dram_tiers, solve_configs, tier_for
from solver.options import ExecutionOptions, SolverOptions
from solver.search.parallel import Choice


def _stage_two(system: System, execution: ExecutionOptions, util: float, sram: float):
    peak = dm.stored_peak(system, execution.math_precision)
    return dp.StageTwo(
        1, 1, execution.word_bytes, util, peak, dm.Ratios(), 1, sram,
        dm.stored_Bps(system.dram.bandwidth_Bps), execution.overlap,
        execution.serialize_network,
    )  # fmt: skip


def _with_compute(graph, costs, c: dp.StageTwo) -> list[dp.KernelCost]:
    """The util branch's compute of each kernel (lane/stage: priced per configuration)."""
    if c.compute_util <= 0:
        return costs
    scale = 1 / (c.compute_util * c.peak_flops)
    return [
        dp.KernelCost(
            k.flop * scale,
            k.network_s,
            k.out_bytes,
            k.tile_out_bytes,
            k.weight_bytes,
            k.flop,
            k.sharding,
        )  # fmt: skip
        for k in costs
    ]


def _lanes(graph, execution: ExecutionOptions, shards, c: dp.StageTwo):
    if c.compute_util > 0:
        return None
    return lane_compute(graph, shards, execution.dfmodel, 1, c.word_bytes, c.peak_flops)


def search_dlrm(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    util: float,
):
    """(the DFStep or None, why the layout failed, its lower bound), as search_choices."""
    o = execution.dfmodel
    graph = workload.phases[0].graph
    per_copy = fft.chips_per_copy(system, o.num_copy)
    if o.global_batch % per_copy:
        raise SetupError(
            f"--cost-model dfmodel: DFModel's DLRM branch needs global_batch_size "
            f"({o.global_batch}) divisible by the chips per copy ({per_copy}, its DP)"
        )
    micro = o.global_batch // per_copy
    a2a = fft.a2a_seconds_per_byte(system, per_copy) if per_copy > 1 else 0.0
    sram = dm.f32(system.chip.sram_bytes) if not o.pmu else math.inf
    choice = _dp_choice(system, per_copy)
    for dram_Bps, capacity in dram_tiers(system, execution):  # the second DRAM's: see there
        c = replace(_stage_two(system, execution, util, sram), dram_Bps=dram_Bps)
        costs = br.dlrm_kernel_costs(graph, per_copy, execution.word_bytes, micro, a2a)
        costs = _with_compute(graph, costs, c)
        shards = [(d.M, d.K, d.N) for d in map(dm.dims_of, graph.kernels)]
        lanes = _lanes(graph, execution, shards, c)
        problem, sol, floor = solve_configs(graph, costs, c, execution, options, lanes)
        if not math.isfinite(sol.objective_s):
            why = f"no grouping into configurations (status {sol.status})"
            return None, [(choice, why)], math.inf
        config_of = {problem.kernels[p].name: ci for ci, seg in enumerate(sol.configs) for p in seg}
        weights, live = dp.dram_bytes(graph, costs, config_of)
        dram = weights + live + o.table_bytes / per_copy
        why = _dram(dram, capacity, "weights + live edges + embedding tables / chips per copy")
        if not why:
            break
    if why:
        return None, [(choice, why)], math.inf
    scale = o.global_batch / per_copy / max(o.num_copy, 1)  # DFModel: final = step / num_copy
    step = DFStep(
        choice, problem, sol, sol.objective_s, 1.0, 1, micro, 0.0, sol.objective_s * scale,
        floor * scale, weights, live + o.table_bytes / per_copy, num_copy=o.num_copy,
        repeat=scale,
    )  # fmt: skip
    return step, [], step.lower_latency_s


def search_hpl(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    util: float,
):
    """(the DFStep or None, why the layout failed, its lower bound), as search_choices."""
    o = execution.dfmodel
    graph = workload.phases[0].graph
    per_copy = fft.chips_per_copy(system, o.num_copy)
    grid = br.hpl_grid(system, per_copy)
    dram = o.hpl_n * o.hpl_n * execution.word_bytes / per_copy
    dram_Bps, capacity = tier_for(dram, dram_tiers(system, execution))
    c = replace(_stage_two(system, execution, util, math.inf), dram_Bps=dram_Bps)
    costs, comm = br.hpl_kernel_costs(graph, grid, execution.word_bytes)
    costs = _with_compute(graph, costs, c)
    bw_x, bw_y = (dm.stored_Bps(lv.link_bandwidth_Bps) for lv in system.network[:2])

    def network(members):
        p2p = [comm[k][0] / bw_x for k in members]
        bcast = [comm[k][1] / bw_y for k in members]
        return (sum(p2p), p2p) if sum(p2p) >= sum(bcast) else (sum(bcast), bcast)

    x, y = grid
    shards = [(math.ceil(d.M / x), math.ceil(d.K / y), d.N) for d in map(dm.dims_of, graph.kernels)]
    lanes = _lanes(graph, execution, shards, c)
    problem, sol, floor = solve_configs(graph, costs, c, execution, options, lanes, network)
    choice = fft_choice(system)
    if not math.isfinite(sol.objective_s):
        return None, [(choice, f"no grouping into configurations (status {sol.status})")], math.inf
    why = _dram(dram, capacity, "n^2 x word / chips per copy")
    if why:
        return None, [(choice, why)], math.inf
    total, copies = sol.objective_s, max(o.num_copy, 1)  # DFModel: final = step / num_copy
    step = DFStep(
        choice, problem, sol, total, 1.0, 1, 1, 0.0, total / copies, floor / copies, 0.0, dram,
        num_copy=o.num_copy, repeat=1 / copies,
    )  # fmt: skip
    return step, [], step.lower_latency_s


def _dp_choice(system: System, per_copy: int) -> Choice:
    """DFModel's DLRM layout: DP over every level of a copy."""
    levels = tuple(system.network)
    span = tuple((lv, lv.degree) for lv in levels)
    return Choice((("DP", per_copy), ("PP", 1), ("TP", 1)), (("DP", span),) if span else (), levels)


def _dram(need: float, cap: float, what: str) -> str:
    """Why DFModel's DRAM row rejects `need` bytes per chip within `cap` (its first DRAM's
    capacity, or both DRAMs'; dram_cap 0 = no limit: inf)."""
    if 0 < cap * (1 + 1e-9) < need:
        return f"DFModel's DRAM use {what} = {need:,.0f} B per chip exceeds {cap:,.0f} B"
    return ""
