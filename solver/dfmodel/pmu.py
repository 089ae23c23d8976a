"""DFModel's place-and-route rows (a chip with `pmu > 0`), for `--cost-model dfmodel`.

Source: fengqian-ayce/DFModel src/intra_chip.py @ 04f93d5 (its `pmu != 0` branch); facts
only, the code is MapShard's. On such a chip DFModel has no SRAM row; instead every buffer
takes whole pattern memory units (PMUs) of `pmu_cap` bytes, and a configuration may use
at most `pmu` of them, counting every edge with an end in it and every weight in it:
  edge e (producer s, consumer d), b_e = s's shard M x N x word (one tile):
    PMU_e >= 2 b_e / pmu_cap (crossing: DFModel's D) or depth_e b_e / pmu_cap (fused: B)
    PMU_e >= lane_d (a "lane" input) or PMU_e x W >= stage_d x H (a "stage" input: a
      weight GEMM's input, the second input of a two-input GEMM)
    PMU_e x K_s >= lane_s x stage_s x H (a GEMM producer), PMU_e >= lane_s (element-wise)
  weight of kernel w: PMU_w >= shard M x K x word / pmu_cap, PMU_w >= lane_w
  DFModel's tiling_factor: a weight kernel alone in its configuration on exactly all the
  cores may split its weight and its out-edges' buffers (then >= 1 PMU each).
For a weight kernel's out-edges DFModel bounds PMU_e by the size and depth of the edge
whose *index* is the weight's index (an indexing slip, it seems); MapShard uses the
edge's own: a documented deviation.

For one assignment of kernels to configurations the cores and PMUs are chosen by one MILP
(HiGHS): per kernel a one-hot menu of (lane, stage) pairs that are each the fewest lanes
(stages) for their row (column) count, per configuration T_c >= the chosen cycles and
II_c by the overlap rule. Assignments are tried in order of their price without these rows
(solver/dfmodel/lane_search.py, a lower bound); the first whose bound reaches the best
found ends the search: exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from generator.graph import KernelGraph, OperandRole
from solver.dfmodel.assign import Rules, ideals
from solver.dfmodel.problem import buffer_depths
from solver.milp.linear import LinearModel, solve

US = 1e6  # the MILP works in microseconds


@dataclass(frozen=True)
class PmuChip:
    pmu: int
    pmu_cap: float
    cores: int
    widths: tuple[int, int]  # lane width W, stage width H


def pairs(
    shard: tuple[int, int, int],
    simd: bool,
    effective: int,
    widths: tuple[int, int],
    cores: int,
    whole: bool = False,
) -> list[tuple[int, int, int]]:
    """(lane, stage, cycles) with lane the fewest for its ceil(M / (lane W)) and stage the
    fewest for its column count, lane x stage <= cores (cycles without num_input); with
    `whole` also every (lane, stage) taking exactly all the cores (a weight kernel's
    tiling_factor needs that, and more stages than useful cost PMUs: all are offered)."""
    m, k, n = shard
    lane_w, stage_w = widths

    def fewest(size: int, width: int, most: int) -> list[int]:
        out, last = [], None
        for x in range(1, min(most, max(1, math.ceil(size / width))) + 1):
            f = math.ceil(size / (x * width))
            if f != last:
                out.append(x)
                last = f
        return out

    lanes = fewest(m, lane_w, cores)
    if simd:
        picks = [(lane, 1) for lane in lanes] + ([(cores, 1)] if whole else [])
        return [(lane, 1, math.ceil(m / (lane * lane_w)) * n) for lane, _ in sorted(set(picks))]
    depth, width = (k, effective) if effective > 0 else (n, stage_w)
    stages = fewest(depth, width, cores)
    rest = n if effective > 0 else k
    picks = {(lane, stage) for lane in lanes for stage in stages if lane * stage <= cores}
    if whole:  # every split of exactly all the cores (DFModel's tiled weight kernel)
        picks |= {(lane, cores // lane) for lane in range(1, cores + 1) if cores % lane == 0}
    return [
        (lane, stage, math.ceil(m / (lane * lane_w)) * math.ceil(depth / (stage * width)) * rest)
        for lane, stage in sorted(picks)
    ]


def assignments(n: int, preds: Sequence[int], rules: Rules) -> list[list[list[int]]]:
    """Every assignment to at most rules.num_configs configurations (non-empty ones, in
    order) that the rules allow."""
    downs = ideals(n, preds)
    full = (1 << n) - 1
    out: list[list[list[int]]] = []

    def grow(low: int, j: int, path: list[list[int]]) -> None:
        if low == full:
            out.append(path)
            return
        if j == rules.num_configs:
            return
        for high in downs if j < rules.num_configs - 1 else (full,):
            if high & low != low:
                continue
            if high == low:
                grow(low, j + 1, path)
                continue
            members = [k for k in range(n) if (high & ~low) >> k & 1]
            if rules.allows(j, members):
                grow(high, j + 1, path + [members])

    grow(0, 0, [])
    return out


def stage_inputs(graph: KernelGraph) -> set[int]:
    """Edges DFModel labels "stage": a weight GEMM's first input, a two-input GEMM's
    second (in the order of the connections); every other edge is a "lane" input."""
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    seen: dict[int, int] = {}
    out = set()
    for i, e in enumerate(graph.edges):
        d = index[e.dst]
        nth = seen.get(d, 0)
        seen[d] = nth + 1
        kern = graph.kernels[d]
        gemm = "K" in kern.dim_sizes
        weight = any(o.role == OperandRole.WEIGHT for o in kern.operands)
        if gemm and ((weight and nth == 0) or (not weight and nth == 1)):
            out.add(i)
    return out


def solve_assignment(
    graph: KernelGraph,
    configs: Sequence[Sequence[int]],
    menus: Sequence[Sequence[tuple[int, int, int]]],
    streams: Sequence[int],
    shards: Sequence[tuple[int, int, int]],
    word: float,
    chip: PmuChip,
    fixed: Sequence[tuple[float, float]],
    overlap: bool,
    seconds_per_cycle: float,
    serial: bool = False,
) -> tuple[float, list[int]] | None:
    """The least sum of II over `configs` with DFModel's core and PMU rows: (seconds, the
    menu index each kernel takes), None when infeasible. `fixed`: per configuration
    (memory s, network s); `seconds_per_cycle`: num_tile / freq; `serial`: the network
    after max(compute, memory) (DFModel's OVERLAP_COMPUTE_MEMORY)."""
    model = LinearModel()
    config_of = {k: c for c, cf in enumerate(configs) for k in cf}
    x = [[model.add_col(0.0, 0, 1, True) for _ in menu] for menu in menus]
    for k, cols in enumerate(x):
        model.add_row(dict.fromkeys(cols, 1.0), 1, 1, f"one_pair[{k}]")

    def use(k: int, what) -> dict[int, float]:
        return {col: float(what(p)) for col, p in zip(x[k], menus[k])}

    pmu_terms: list[dict[int, float]] = [{} for _ in configs]
    tiled = _weight_rows(model, graph, configs, config_of, use, shards, word, chip, pmu_terms)
    _edge_rows(model, graph, config_of, use, shards, word, chip, pmu_terms, tiled)
    for c, cf in enumerate(configs):
        cores: dict[int, float] = {}
        for k in cf:
            cores.update(use(k, lambda p: p[0] * p[1]))
        model.add_row(cores, -math.inf, chip.cores, f"cores[{c}]")
        model.add_row(pmu_terms[c], -math.inf, chip.pmu, f"pmu[{c}]")
        _latency(model, cf, x, menus, streams, fixed[c], (overlap, serial), seconds_per_cycle)
    got = solve(model, gap=1e-9)
    if got.status != "optimal":
        return None
    picks = [max(range(len(cols)), key=lambda j: got.values[cols[j]]) for cols in x]
    return got.objective / US, picks


def _weight_rows(model, graph, configs, config_of, use, shards, word, chip, pmu_terms):
    """PMU_w >= weight bytes / pmu_cap and >= lane_w, per weight kernel w. DFModel's
    tiling_factor: a weight kernel alone in its configuration may take every core
    (lane x stage = core) and split its weight and out-edge buffers into as many tiles as
    it likes (binary z_w): then one PMU each holds a tile. Returns {w: z_w column}."""
    tiled: dict[int, int] = {}
    for k, kern in enumerate(graph.kernels):
        if not any(o.role == OperandRole.WEIGHT for o in kern.operands):
            continue
        m, kk, _ = shards[k]
        need = math.ceil(m * kk * word / chip.pmu_cap)
        col = model.add_col(0.0, min(need, 1), math.inf, True)
        row = {col: 1.0}
        if len(configs[config_of[k]]) == 1 and need > 1:
            z = tiled[k] = model.add_col(0.0, 0, 1, True)
            row[z] = float(need - 1)
            model.add_row({z: -float(chip.cores), **use(k, lambda p: p[0] * p[1])}, 0, math.inf)
        model.add_row(row, need, math.inf, f"weight_bytes[{kern.name}]")
        model.add_row({col: 1.0, **_neg(use(k, lambda p: p[0]))}, 0, math.inf)
        pmu_terms[config_of[k]][col] = 1.0
    return tiled


def _edge_rows(model, graph, config_of, use, shards, word, chip, pmu_terms, tiled) -> None:
    """PMU_e of every edge: its bytes (2 tiles crossing, depth tiles fused; a tiled
    producer's at least one PMU), its consumer's lane or stage input, its producer's
    lanes (x stages x H / K for a GEMM); counted in both ends' configurations."""
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    w_, h_ = chip.widths
    stage_in = stage_inputs(graph)
    for i, e in enumerate(graph.edges):
        s, d = index[e.src], index[e.dst]
        b = shards[s][0] * shards[s][2] * word
        crossing = config_of[s] != config_of[d]
        need = math.ceil((2 if crossing else graph_depth(graph, e)) * b / chip.pmu_cap)
        col = model.add_col(0.0, min(need, 1), math.inf, True)
        row = {col: 1.0}
        if s in tiled and need > 1:
            row[tiled[s]] = float(need - 1)
        model.add_row(row, need, math.inf, f"edge_bytes[{e.src}->{e.dst}]")
        if i in stage_in:
            model.add_row({col: float(w_), **_neg(use(d, lambda p: p[1] * h_))}, 0, math.inf)
        else:
            model.add_row({col: 1.0, **_neg(use(d, lambda p: p[0]))}, 0, math.inf)
        if "K" in graph.kernels[s].dim_sizes:
            ks = float(shards[s][1])
            model.add_row({col: ks, **_neg(use(s, lambda p: p[0] * p[1] * h_))}, 0, math.inf)
        else:
            model.add_row({col: 1.0, **_neg(use(s, lambda p: p[0]))}, 0, math.inf)
        for c in {config_of[s], config_of[d]}:
            pmu_terms[c][col] = 1.0


def _latency(model, members, x, menus, streams, fixed, overlap, seconds_per_cycle) -> None:
    """II_c (in the objective) >= compute, memory and network (overlap), >= max(compute,
    memory) + network (serialised network: DFModel's OVERLAP_COMPUTE_MEMORY) or = their
    sum; compute = T_c x num_tile / freq with T_c >= every member's chosen cycles."""
    mem_s, net_s = fixed
    overlapped, serial = overlap
    scale = seconds_per_cycle * US
    t = model.add_col(0.0)
    for k in members:
        terms = {col: -float(p[2] * streams[k]) for col, p in zip(x[k], menus[k])}
        model.add_row({t: 1.0, **terms}, 0, math.inf)
    if serial:
        ii = model.add_col(1.0, (mem_s + net_s) * US)
        model.add_row({ii: 1.0, t: -scale}, net_s * US, math.inf)
    elif overlapped:
        ii = model.add_col(1.0, max(mem_s, net_s) * US)
        model.add_row({ii: 1.0, t: -scale}, 0, math.inf)
    else:
        ii = model.add_col(1.0, (mem_s + net_s) * US)
        model.add_row({ii: 1.0, t: -scale}, (mem_s + net_s) * US, math.inf)


def _neg(terms: dict[int, float]) -> dict[int, float]:
    return {j: -v for j, v in terms.items()}


def graph_depth(graph: KernelGraph, edge) -> int:
    return buffer_depths(graph)[(edge.src, edge.dst)]


@dataclass(frozen=True)
class PmuData:
    """What the PMU rows read besides the lane/stage tables."""

    chip: PmuChip
    menus: tuple[tuple[tuple[int, int, int], ...], ...]  # per kernel (lane, stage, cycles)
    streams: tuple[int, ...]  # per kernel num_input (1 when unset)
    shards: tuple[tuple[int, int, int], ...]
    word: float
