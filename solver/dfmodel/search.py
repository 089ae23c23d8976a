"""`--cost-model dfmodel`: DFModel's equations, solved by MapShard's search.

For every parallel choice DFModel's layout allows (each of TP/PP/DP on at most one level):
stage 1 fixes each kernel's sharding (least communication, solved by the MILP), stage 2
searches the configurations with the fusion search (solver/fusion/solve.py) on DFModel's
numbers (solver/dfmodel/problem.py), and the step is assembled DFModel's way
(intra_chip.py):
  training split: with backward kernels and num_config C < kernels, forward kernels take
    configurations 0..C/2-1 and backward ones C/2..C-1 (odd C: the better of the two
    splits; DFModel also lets both share the middle one, not searched here)
  LLM:   step = sum_c II_c * (1 + (PP-1) / (micro_batches * c')) * layers_per_stage
                * global_batch / DP + p2p
         micro_batches = global_batch / (micro_batch * DP) (an integer, else infeasible),
         layers = num_layer (num_layer_in_graph = 1) else PP, layers_per_stage =
         ceil(layers / PP), c' = layers_per_stage - 1 if >= 2 else 1,
         p2p = layers * (2 hidden seq_len word, training only) / B_PP
  graph: step = sum_c II_c
  FFT (execution.fft): one fixed layout, step = sum_c II_c (solver/dfmodel/fft_search.py)
  DLRM / HPL (execution.dlrm / hpl): one fixed layout each
    (solver/dfmodel/branch_search.py)
  compute_util 0 (DFModel's lane/stage compute), num_input, HPL's network: a configuration
    costs no sum over its kernels; its configurations are searched exhaustively
    (solver/dfmodel/lane_search.py). num_tile: solver/dfmodel/search.tiles_to_try.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import solver.dfmodel.model as dm
import solver.dfmodel.problem as dp
from generator.graph import KernelGraph, Pass, Workload
from hardware.system import System
from schema.errors import SetupError
from solver.check import config_cost, mapping_cost
from solver.cost.problem import MappingProblem
from solver.dfmodel.assign import Rules
from solver.dfmodel.lane_search import lane_compute, lane_configs
from solver.dfmodel.price import exact_price
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import solve_graph
from solver.milp.model import solve_configurations
from solver.options import ExecutionOptions, SolverOptions
from solver.search.parallel import Choice, enumerate_choices
from solver.search.placement_pin import pinned_choices
from solver.verify import dfmodel_sram_row


@dataclass(frozen=True)
class DFStep:
    """One choice's DFModel step: the configurations' sum, the factors, the total."""

    choice: Choice
    problem: MappingProblem
    solution: GraphSolution
    config_sum_s: float  # DFModel's sum of configuration latencies (its D matrix)
    pipeline_factor: float
    layers_per_stage: int
    micro_batches: int
    p2p_s: float
    latency_s: float
    # the search's proven lower bound of the step (its objective charges a producer once for
    # all its consumers in other configurations; DFModel, and latency_s, once per edge)
    lower_latency_s: float
    dram_weights_bytes: float = 0.0  # DFModel's DRAM per chip: weights x layers per stage
    dram_activations_bytes: float = 0.0  # ... and the most live edges x micro-batch size
    num_copy: int = 1  # DFModel's FFT num_copy: copies of the topology (System Cost)
    # what multiplies config_sum_s besides the pipeline factor: layers per stage x
    # batches / DP (LLM), global batch / DP / num_copy (DLRM), 1 / num_copy (FFT, HPL)
    repeat: float = 1.0


def dfmodel_choices(system: System) -> list[Choice]:
    """Parallel choices DFModel can express: each parallelism on at most one level."""
    n = system.num_chips
    return [
        c for c in enumerate_choices(system, n, n, n) if all(len(span) <= 1 for _, span in c.spans)
    ]


def backward(graph: KernelGraph) -> list[bool]:
    return [k.pass_ != Pass.FWD for k in graph.kernels]


def streamed(graph: KernelGraph) -> list[bool]:
    """DFModel's num_input_set: a kernel with num_input given never shares a
    configuration with one without."""
    return [bool(k.dfmodel_extra and k.dfmodel_extra.num_input > 0) for k in graph.kernels]


def stage_one(graph: KernelGraph, tp: int, options: SolverOptions) -> tuple[str, ...]:
    """inter_chip's shardings: least bytes communicated (the MILP over one-hot menus)."""
    problem, _ = dp.sharding_problem(graph, tp)
    configs = [[k] for k in range(len(graph.kernels))]
    r = solve_configurations(problem, configs, replace(options, time_limit_s=0.0))
    if r.status == "infeasible" or not r.choice:
        raise SetupError("--cost-model dfmodel: no legal sharding of the graph (inter_chip)")
    return tuple(m.options[o].sharding for m, o in zip(problem.kernels, r.choice))


def _splits(n_configs: int) -> list[tuple[int, int]]:
    """(forward, backward) configuration counts of DFModel's training split (n_configs >= 2;
    with one, both passes share it)."""
    half = n_configs // 2
    if n_configs % 2 == 0:
        return [(half, half)]
    return [(half + 1, half), (half, half + 1)]


def solve_configs(
    graph: KernelGraph,
    costs: list[dp.KernelCost],
    c: dp.StageTwo,
    execution: ExecutionOptions,
    options: SolverOptions,
    lanes=None,
    network=None,
    quick: bool = False,
) -> tuple[MappingProblem, GraphSolution, float]:
    """The configurations under DFModel's numbers (one problem, or the forward/backward
    split), re-priced exactly: (the problem over every kernel whose rule charges each
    crossing edge at both ends, its solution, the search's lower bound of the sum).
    `lanes` (a lane_search.LaneCompute) or `network` (a per-set rule): a configuration's
    cost is no sum over its kernels, searched exhaustively (solver/dfmodel/lane_search.py)."""
    if lanes is not None or network is not None or any(streamed(graph)):
        return _exhaustive(graph, costs, c, execution, lanes, network, quick)
    order = [
        i
        for name in graph.topological_order()
        for i, k in enumerate(graph.kernels)
        if k.name == name
    ]
    n = len(order)
    bwd = backward(graph)
    limit = execution.config_budget(n)
    pins = [k.pinned_config for k in graph.kernels]
    if limit == n:  # kernel by kernel, or DFModel's C == kernels: it pins Config[i] = i
        problem = dp.stage_two_problem(graph, costs, order, c, n, [pins[k] for k in order])
        problem = replace(problem, dataflow=False)
        sol = _in_order(problem)
        return exact_price(graph, costs, c, [[order[p] for p in cf] for cf in sol.configs], sol)
    if not any(bwd) or all(bwd):
        problem = dp.stage_two_problem(graph, costs, order, c, limit, [pins[k] for k in order])
        sol = solve_graph(problem, options)
        return exact_price(graph, costs, c, [[order[p] for p in cf] for cf in sol.configs], sol)
    fwd_k = [k for k in order if not bwd[k]]
    bwd_k = [k for k in order if bwd[k]]
    names = {k.name: i for i, k in enumerate(graph.kernels)}
    cut = frozenset((e.src, e.dst) for e in graph.edges if bwd[names[e.src]] != bwd[names[e.dst]])
    splits = _splits(limit)
    if limit < 2:  # C = 1: DFModel's odd-C rule puts both passes in its middle (only) one
        problem = dp.stage_two_problem(graph, costs, order, c, limit, [pins[k] for k in order])
        sol = solve_graph(problem, options)
        return exact_price(graph, costs, c, [[order[p] for p in cf] for cf in sol.configs], sol)
    best = None
    for nf, nb in splits:
        pf = dp.stage_two_problem(graph, costs, fwd_k, c, nf, [pins[k] for k in fwd_k], cut)
        fixed = [pins[k] - nf if pins[k] >= 0 else -1 for k in bwd_k]
        pb = dp.stage_two_problem(graph, costs, bwd_k, c, nb, fixed, cut)
        sf, sb = solve_graph(pf, options), solve_graph(pb, options)
        total = sf.objective_s + sb.objective_s
        if best is None or total < best[0]:
            best = (total, sf, sb)
    _, sf, sb = best
    configs = [[fwd_k[p] for p in cf] for cf in sf.configs]
    configs += [[bwd_k[p] for p in cb] for cb in sb.configs]
    status = "optimal" if sf.status == sb.status == "optimal" else "time_limit"
    stats = SearchStats(
        milps=sf.stats.milps + sb.stats.milps,
        notes=sf.stats.notes + sb.stats.notes,
        stop=sf.stats.stop or sb.stats.stop,
        space="; ".join(
            f"{part}: {st.space}"
            for part, st in (("forward", sf.stats), ("backward", sb.stats))
            if st.space
        ),
    )
    sol = GraphSolution(
        (), (), sf.objective_s + sb.objective_s, sf.bound_s + sb.bound_s, status, stats
    )
    return exact_price(graph, costs, c, configs, sol)


def _exhaustive(graph, costs, c, execution, lanes, network, quick: bool):
    """solve_configs when a configuration's cost is no sum over its kernels (lane/stage,
    HPL's links, num_input): every assignment DFModel allows (lane_search.py)."""
    n = len(graph.kernels)
    limit = execution.config_budget(n)
    bwd = backward(graph)
    split = any(bwd) and not all(bwd) and limit < n
    rules = Rules(
        limit,
        tuple(k.pinned_config for k in graph.kernels),
        tuple(bwd) if split else (),
        tuple(streamed(graph)),
    )
    in_order = limit == n
    return lane_configs(graph, costs, c, rules, in_order, lanes, network, quick)


def _in_order(problem: MappingProblem) -> GraphSolution:
    """Kernel by kernel (DFModel: Config[i] = i): one configuration per kernel, in order."""
    configs = tuple((k,) for k in range(len(problem.kernels)))
    choice = (0,) * len(problem.kernels)
    total, _ = mapping_cost(problem, configs, choice)
    status = "optimal" if math.isfinite(total) else "infeasible"
    return GraphSolution(configs, choice, total, total, status, SearchStats())


def llm_factors(workload: Workload, choice: Choice) -> tuple[int, int, float, int] | None:
    """(layers, layers_per_stage, pipeline_factor, micro_batches), None when DFModel's
    micro-batch count is not an integer."""
    pp, dpd = choice.degree("PP"), choice.degree("DP")
    micro = max(workload.micro_batch, 1)
    if workload.global_batch % (micro * dpd):
        return None
    nmb = workload.global_batch // (micro * dpd)
    phase = workload.phases[0]
    per_graph = max(1, (workload.model.num_layers if workload.model else 1) // phase.count)
    layers = workload.model.num_layers if workload.model else phase.count
    layers = layers if per_graph == 1 else pp
    lps = math.ceil(layers / pp)
    tail = lps - 1 if lps >= 2 else 1
    return layers, lps, 1 + (pp - 1) / (nmb * tail), nmb


def checked_util(workload: Workload, system: System) -> float:
    """DFModel's fixed compute utilisation (as the float it stores), after the checks every
    branch of its equations needs: one graph. 0 = DFModel's lane/stage compute."""
    if len(workload.phases) != 1:
        raise SetupError("--cost-model dfmodel: DFModel models one graph (one phase) per run")
    return max(dm.f32(system.chip.efficiency.fixed_compute_util), 0.0)  # 0: lane/stage


def search_choices(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
) -> tuple[DFStep | None, list[tuple[Choice, str]], float]:
    """The best DFModel step over every choice, why the others failed, and the least
    lower bound of any choice's step (the proven bound of the best). DFModel's FFT branch
    (one fixed layout) is solver/dfmodel/fft_search.search_fft."""
    graph = workload.phases[0].graph
    util = checked_util(workload, system)
    llm = workload.kind in ("training", "inference") and workload.seq_len > 0
    tile_counts = tiles_to_try(graph, workload.seq_len if llm else 0, execution, util)
    best, failed, lower = None, [], math.inf
    shardings: dict[int, tuple[str, ...]] = {}
    for choice in pinned_choices(dfmodel_choices(system), execution.placement):
        spans = {name.lower(): span for name, span in choice.spans}
        factors = llm_factors(workload, choice) if llm else (1, 1, 1.0, 1)
        if factors is None:
            failed.append((choice, "global batch is not a multiple of micro-batch x DP"))
            continue
        nmb = factors[3]
        tp = choice.degree("TP")
        if tp not in shardings:
            shardings[tp] = stage_one(graph, tp, options)
        ratios = dm.ratios(
            spans, execution.dfmodel.separate_rs_ag_for_ar, system.network, execution.dfmodel.hbd
        )
        row = dfmodel_sram_row(execution, workload)
        sram = dm.f32(system.chip.sram_bytes) if row else math.inf
        step, why = None, ""
        for dram_Bps, capacity in dram_tiers(system, execution):
            base = dp.StageTwo(
                tp, 1, execution.word_bytes, util,
                dm.stored_peak(system, execution.math_precision), ratios, nmb, sram, dram_Bps,
                execution.overlap, execution.serialize_network, dm.all_reduce_alpha_s(spans),
            )  # fmt: skip
            c, costs, (problem, sol, floor) = _best_tiling(
                graph, shardings[tp], base, tile_counts, execution, options
            )
            if not math.isfinite(sol.objective_s):
                why = _no_fit(graph, costs, c, execution, sol.status)
                break
            step = _assemble(
                workload, choice, problem, sol, floor, factors, ratios, c.word_bytes, costs
            )
            why = _dram_overflow(step, capacity)
            if not why:
                break
        if why or step is None:
            failed.append((choice, why))
            continue
        lower = min(lower, step.lower_latency_s)
        if best is None or step.latency_s < best.latency_s:
            best = step
    return best, failed, lower


def tiles_to_try(graph: KernelGraph, seq_len: int, execution: ExecutionOptions, util: float):
    """DFModel's num_tile is free with tile_size x num_tile >= seq_len (tile_size free when
    unset). With compute_util: the largest count dividing every tiled dim (FLOP exact,
    buffers least). With lane/stage compute, where cycles round up per tile: every count
    at which some tiled dim's shard ceil(X / num_tile) changes (a smaller count with the
    same shards is never worse), from the fewest allowed: exact over DFModel's integer."""
    exact = dp.num_tile(graph, seq_len)
    size = execution.dfmodel.tile_size
    least = math.ceil(seq_len / size) if size > 0 and seq_len > 0 else 1
    if size > 0 and exact * size < seq_len:
        exact = least
    if util > 0:
        return [exact]
    if seq_len > 0:
        # every count where some tiled dim's ceil(X / num_tile) changes (the fewest tiles
        # for each shard size): exact over DFModel's free integer
        dims = {getattr(dm.dims_of(k), k.dfmodel_tiling) for k in graph.kernels if k.dfmodel_tiling}
        return sorted({t for x in dims for t in breakpoints(x) if t >= least} | {least})
    return sorted({exact, least})


def breakpoints(size: int) -> list[int]:
    """The fewest tiles giving each distinct ceil(size / tiles), tiles = 1..size."""
    out, tiles = [], 1
    while tiles <= size:
        out.append(tiles)
        shard = math.ceil(size / tiles)
        if shard == 1:
            break
        tiles = math.ceil(size / (shard - 1))
    return out


def _best_tiling(graph, shardings, base: dp.StageTwo, counts, execution, options):
    """(StageTwo, kernel costs, solve_configs' result) of the best num_tile in `counts`:
    with many counts (lane/stage), each first priced by the search's total alone."""

    def setup(tiles: int):
        c = replace(base, num_tile=tiles)
        costs = dp.kernel_costs(graph, shardings, c)
        lanes = _lanes(graph, shardings, c, execution) if c.compute_util <= 0 else None
        return c, costs, lanes

    bounds = [(0.0, tiles) for tiles in counts]
    if len(counts) > 2:  # each count's total without PMU rows: exact, or a lower bound
        bounds = []
        for tiles in counts:
            c, costs, lanes = setup(tiles)
            got = solve_configs(graph, costs, c, execution, options, lanes, quick=True)
            bounds.append((got[2], tiles))
        bounds.sort()
    found = None
    for bound, tiles in bounds:
        if found is not None and bound >= found[2][1].objective_s * (1 - 1e-12):
            break  # no later count can do better
        c, costs, lanes = setup(tiles)
        got = solve_configs(graph, costs, c, execution, options, lanes)
        if found is None or got[1].objective_s < found[2][1].objective_s:
            found = (c, costs, got)
    return found


def _lanes(graph: KernelGraph, shardings, c: dp.StageTwo, execution: ExecutionOptions):
    shards = [
        dm.shard_dims(dm.dims_of(k), s, c.tp, c.num_tile) for k, s in zip(graph.kernels, shardings)
    ]
    return lane_compute(graph, shards, execution.dfmodel, c.num_tile, c.word_bytes, c.peak_flops)


def _no_fit(graph: KernelGraph, costs, c: dp.StageTwo, execution: ExecutionOptions, status: str):
    """Why no grouping fits DFModel's SRAM row, and what would: the SRAM one configuration
    of every kernel needs (num_config 1) and the largest one kernel alone needs (one
    configuration per kernel), against the chip's."""
    order = [i for name in graph.topological_order() for i, k in enumerate(graph.kernels)
             if k.name == name]  # fmt: skip
    problem = dp.stage_two_problem(graph, costs, order, c, len(order))
    choice = (0,) * len(order)
    whole = config_cost(problem, list(range(len(order))), choice).sram_bytes
    alone = max(config_cost(problem, [k], choice).sram_bytes for k in range(len(order)))
    limit = execution.num_config or "one per kernel"
    fix = (
        f"sram_cap >= {alone:,.0f} B even with one configuration per kernel"
        if alone > c.sram_bytes
        else f"more configurations (num_config; one per kernel fits) or sram_cap >= {whole:,.0f} B "
        "for one configuration of all"
    )
    return (
        f"no grouping into at most {limit} configurations fits DFModel's SRAM row: "
        f"{c.sram_bytes:,.0f} B per chip, while one configuration of all {len(order)} kernels "
        f"needs {whole:,.0f} B (weights and edge buffers, counted conservatively; search status "
        f"{status}); needs {fix}"
    )


def dram_tiers(system: System, execution: ExecutionOptions) -> list[tuple[float, float]]:
    """(DRAM bandwidth, capacity) a step is priced at and must fit, tried in order: the
    first DRAM's; with DFModel's second DRAM (memory.second_dram_cap > 0), a step that
    outgrows the first runs at the capacity-weighted mean (cap1 bw1 + cap2 bw2) / (cap1 +
    cap2) within cap1 + cap2 (intra_chip.py @ 0e97740: its big_flag rows)."""
    bw1, cap1 = dm.stored_Bps(system.dram.bandwidth_Bps), system.dram.capacity_bytes
    cap2 = dm.f32(execution.dfmodel.second_dram_cap)
    if cap2 <= 0 or not math.isfinite(cap1):
        return [(bw1, cap1)]
    bw2, f1 = dm.stored_Bps(execution.dfmodel.second_dram_Bps), dm.f32(cap1)
    return [(bw1, cap1), ((f1 * bw1 + cap2 * bw2) / (f1 + cap2), cap1 + cap2)]


def tier_for(need_bytes: float, tiers: list[tuple[float, float]]) -> tuple[float, float]:
    """The first (bandwidth, capacity) of `tiers` that holds `need_bytes` (a step whose DRAM
    use is known before it is solved: HPL's matrix, FFT's signal), else the last."""
    return next((t for t in tiers if need_bytes <= t[1] * (1 + 1e-9)), tiers[-1])


def _dram_overflow(step: DFStep, capacity_bytes: float) -> str:
    """Why DFModel's DRAM capacity row rejects the step ('' when it fits)."""
    need = step.dram_weights_bytes + step.dram_activations_bytes
    if need <= capacity_bytes * (1 + 1e-9):
        return ""
    return (
        f"DFModel's DRAM use {need:,.0f} B per chip exceeds {capacity_bytes:,.0f} B "
        "(weights x layers per stage + live edges x micro-batch)"
    )


def _assemble(workload, choice, problem, sol, lower, factors, ratios, word, costs) -> DFStep:
    """DFModel's step for the configurations' sum (and for its lower bound `lower`)."""
    layers, lps, pf, nmb = factors
    graph = workload.phases[0].graph
    if workload.kind in ("training", "inference") and workload.seq_len > 0:
        training = any(backward(graph))
        hidden = workload.model.hidden_size if workload.model else 0
        inter = 2 * hidden * workload.seq_len * word if training else 0.0
        p2p = ratios.p2p * inter * layers
        scale = pf * lps * workload.global_batch / choice.degree("DP")
    else:
        p2p, scale = 0.0, 1.0
    total = sol.objective_s
    config_of = {problem.kernels[p].name: c for c, seg in enumerate(sol.configs) for p in seg}
    weights, live = dp.dram_bytes(graph, costs, config_of)
    return DFStep(
        choice,
        problem,
        sol,
        total,
        pf,
        lps,
        nmb,
        p2p,
        total * scale + p2p,
        lower * scale + p2p,
        weights * lps,
        live * max(workload.micro_batch, 1),
        repeat=scale / pf,
    )
