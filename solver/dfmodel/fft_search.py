"""`--cost-model dfmodel` on DFModel's FFT branch: one fixed layout (N over the chips of a
copy, no TP/PP/DP choice), the configurations searched as on any DFModel graph, the step
the sum of the configurations (solver/dfmodel/fft.py holds the equations)."""

from __future__ import annotations

import math

import solver.dfmodel.fft as fft
import solver.dfmodel.model as dm
import solver.dfmodel.problem as dp
from generator.graph import Workload
from hardware.system import System
from solver.dfmodel.lane_search import lane_compute
from solver.dfmodel.search import DFStep, dram_tiers, solve_configs, tier_for
from solver.options import ExecutionOptions, SolverOptions
from solver.search.parallel import Choice


def fft_choice(system: System) -> Choice:
    """DFModel's FFT layout: TP = PP = DP = 1, every level spanned by the FFT's N split."""
    levels = tuple(system.network)
    span = tuple((lv, lv.degree) for lv in levels)
    return Choice((("DP", 1), ("PP", 1), ("TP", 1)), (("FFT", span),) if span else (), levels)


def search_fft(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    util: float,
):
    """(the best DFStep or None, why the layout failed, its lower bound): the same
    contract as search.search_choices, for the one layout DFModel's FFT allows."""
    graph = workload.phases[0].graph
    per_copy = fft.chips_per_copy(system, execution.fft_copies)
    choice = fft_choice(system)
    peak = dm.stored_peak(system, execution.math_precision)
    a2a = fft.a2a_seconds_per_byte(system, per_copy) if per_copy > 1 else 0.0
    costs = fft.fft_kernel_costs(graph, per_copy, execution.word_bytes, util, peak, a2a)
    dram = execution.fft_length * execution.word_bytes / per_copy
    dram_Bps, capacity = tier_for(dram, dram_tiers(system, execution))  # a second DRAM's
    c = dp.StageTwo(
        1, 1, execution.word_bytes, util, peak, dm.Ratios(), 1, math.inf, dram_Bps,
        execution.overlap, execution.serialize_network,
    )  # fmt: skip
    lanes = None
    if util <= 0:  # DFModel's lane/stage compute at the FFT shard (M, K, ceil(N / P))
        shards = [(d.M, d.K, math.ceil(d.N / per_copy)) for d in map(dm.dims_of, graph.kernels)]
        lanes = lane_compute(graph, shards, execution.dfmodel, 1, execution.word_bytes, peak)
    problem, sol, floor = solve_configs(graph, costs, c, execution, options, lanes)
    if not math.isfinite(sol.objective_s):
        return None, [(choice, f"no grouping into configurations (status {sol.status})")], math.inf
    if 0 < capacity * (1 + 1e-9) < dram:  # DFModel: dram_cap 0 = no limit (inf)
        why = (
            f"DFModel's FFT DRAM use length x word / chips per copy = {dram:,.0f} B exceeds "
            f"{capacity:,.0f} B"
        )
        return None, [(choice, why)], math.inf
    total, copies = sol.objective_s, max(execution.fft_copies, 1)
    step = DFStep(  # DFModel's objective: final_ns x num_copy >= the step
        choice, problem, sol, total, 1.0, 1, 1, 0.0, total / copies, floor / copies, 0.0, dram,
        num_copy=copies, repeat=1 / copies,
    )  # fmt: skip
    return step, [], step.lower_latency_s
