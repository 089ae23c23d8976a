"""DFModel's two stages as MapShard inner problems (solver/cost/problem.py data types).

Stage 1 (inter_chip): each kernel's sharding minimises the bytes communicated, its own
all-reduce when K is sharded plus every layout conversion on its edges; `sharding_problem`
writes that as a kernel-by-kernel MappingProblem (network "seconds" = bytes moved, in
units of the largest tensor), which the MILP solves exactly. Ties are broken towards less
FLOP per chip (a documented choice: DFModel leaves them to Gurobi).

Stage 2 (intra_chip): with the shardings fixed, each kernel has one option whose compute,
network and DRAM numbers are DFModel's (solver/dfmodel/model.py); the fusion search
then chooses the configurations. DFModel charges a crossing edge at both ends; MapShard's
rule charges a consumer's input per edge and a producer's output once when any consumer is
elsewhere, so a producer with several consumers in other configurations pays once here
and once per edge in DFModel: the search's objective is a lower bound of DFModel's; the
found configurations are then re-priced DFModel's way (every edge between two of them cut:
solver/dfmodel/search.py), and the difference is a proven gap (none: optimal).
SRAM is counted conservatively (every edge's two tiles at both ends, plus depth x tile
when fused; a weight kernel that needs DFModel's tiling_factor runs alone), so a plan found
fits DFModel's SRAM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import solver.dfmodel.model as dm
from generator.graph import Kernel, KernelGraph
from schema.errors import SetupError
from solver.cost.latency import config_latency
from solver.cost.problem import EdgeCost, KernelMenu, MappingProblem, Option


@dataclass(frozen=True)
class StageTwo:
    """The constants of one parallel choice."""

    tp: int
    num_tile: int
    word_bytes: float
    compute_util: float
    peak_flops: float
    ratios: dm.Ratios
    micro_batches: int  # DFModel's num_micro_batch_per_pipeline (ALL_REDUCE_PERIODIC)
    sram_bytes: float
    dram_Bps: float
    overlap: bool
    # DFModel's OVERLAP_COMPUTE_MEMORY: II = max(compute, memory) + network (intra_chip.py)
    serialize_network: bool = False
    # DFModel's accelerator.link_latency x 2 (p_TP - 1): what each kernel with an
    # all-reduce adds to its configuration (model.all_reduce_alpha_s)
    all_reduce_alpha_s: float = 0.0


def config_ii(c: StageTwo, compute_s: float, memory_s: float, network_s: float) -> float:
    """DFModel's Per_Config_II: max of the three (PERFECT_OVERLAP), max(compute, memory) +
    network (OVERLAP_COMPUTE_MEMORY) or their sum (NO_OVERLAP): solver.cost.latency's rule
    with no launch overhead."""
    return config_latency(compute_s, memory_s, network_s, 0.0, c.overlap, c.serialize_network)


def num_tile(graph: KernelGraph, seq_len: int) -> int:
    """DFModel's num_tile (LLM only, else 1): it is free with tile_size * num_tile >=
    seq_len; the largest count dividing every tiled dim keeps FLOP exact and buffers least."""
    if seq_len <= 0:
        return 1
    sizes = [getattr(dm.dims_of(k), k.dfmodel_tiling) for k in graph.kernels if k.dfmodel_tiling]
    return math.gcd(*sizes) if sizes else 1


def stage_one_shardings(kernel: Kernel) -> tuple[str, ...]:
    """The shardings stage 1 may give a kernel: DFModel's legal ones, or the input's pin (a
    DFModel variant's `sharding`, e.g. from DFModel's own dse_final.txt) alone."""
    legal = dm.legal_shardings(kernel)
    pin = kernel.pinned_sharding
    if not pin:
        return legal
    if pin not in legal:
        raise SetupError(
            f"--cost-model dfmodel: kernel {kernel.name} pins sharding {pin!r}, which "
            f"DFModel's inter_chip rules do not allow (legal: {', '.join(legal) or 'none'})"
        )
    return (pin,)


def sharding_problem(graph: KernelGraph, tp: int) -> tuple[MappingProblem, float]:
    """Stage 1 as a kernel-by-kernel problem and its unit (bytes): option network = the
    kernel's own bytes communicated (+ the tie-break), edge conv[a][b] = the bytes of the
    layout conversion, both in units of the largest tensor (an objective near 1 keeps
    HiGHS's absolute tolerances meaningless). The tie-break, FLOP per chip relative to the
    largest, weighs together less than a thousandth of the smallest tensor."""
    kernels = graph.kernels
    index = {k.name: i for i, k in enumerate(kernels)}
    legal = [stage_one_shardings(k) for k in kernels]
    outs = [k.operand_bytes(k.outputs[0]) if k.outputs else 0.0 for k in kernels]
    sizes = [b for b in outs + [e.tensor_bytes for e in graph.edges] if b > 0]
    unit = max(sizes, default=1.0)
    tie = 1e-3 * min(sizes, default=1.0) / unit / max(len(kernels), 1)
    flops = [
        [dm.flop_per_tile(dm.dims_of(k), dm.shard_dims(dm.dims_of(k), s, tp, 1)) for s in ss]
        for k, ss in zip(kernels, legal)
    ]
    top = max((f for fs in flops for f in fs), default=1.0) or 1.0
    menus = []
    for k, ss, fs, out in zip(kernels, legal, flops, outs):
        opts = tuple(
            Option(s, "", 0.0, (out if s == "K" else 0.0) / unit + tie * f / top, 0, 0, 0, ())
            for s, f in zip(ss, fs)
        )
        menus.append(KernelMenu(k.name, opts, ss, (), ""))
    edges = []
    for i, e in enumerate(graph.edges):
        a, b = index[e.src], index[e.dst]
        conv = tuple(
            tuple(
                e.tensor_bytes / unit if dm.conversion(graph, i, sa, sb) else 0.0 for sb in legal[b]
            )
            for sa in legal[a]
        )
        edges.append(EdgeCost(a, b, e.dst_operand, conv))
    problem = MappingProblem(tuple(menus), tuple(edges), math.inf, 1.0, False, False, len(kernels))
    return problem, unit


@dataclass(frozen=True)
class KernelCost:
    compute_s: float
    network_s: float
    out_bytes: float  # the output per chip over all tiles (a crossing edge moves it)
    tile_out_bytes: float  # one tile of the output (an on-chip buffer)
    weight_bytes: float  # the weight per chip (SRAM)
    flop: float  # per chip, all tiles
    sharding: str = "none"  # stage 1's choice: outer, M, K, N or none
    # DFModel's newer schema: the kernel's configuration moves its edges x edge_scale and
    # its memory_size x size_scale (one tile, x num_input: solver/dfmodel/lane_search.py)
    edge_scale: float = 1.0
    size_scale: float = 1.0


def kernel_costs(graph: KernelGraph, shardings: Sequence[str], c: StageTwo) -> list[KernelCost]:
    """Every kernel's DFModel numbers for fixed shardings."""
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    base = []
    for k, s in zip(graph.kernels, shardings):
        dims = dm.dims_of(k)
        m, kk, n = dm.shard_dims(dims, s, c.tp, c.num_tile)
        flop = dm.flop_per_tile(dims, (m, kk, n)) * c.num_tile
        tile_out = m * n * c.word_bytes
        own = dm.own_collective(k, s)
        if own == "all_reduce_periodic":
            net = tile_out / max(c.micro_batches, 1) * c.ratios.all_reduce_periodic
        else:
            net = tile_out * c.num_tile * c.ratios.of(own)
        if own == "all_reduce" and tile_out > 0:
            net += c.all_reduce_alpha_s  # DFModel's per-hop latency, once per kernel
        weight = m * kk * c.word_bytes if dims.has_weight else 0.0
        # compute_util 0: DFModel's lane/stage model, priced per configuration
        # (solver/dfmodel/lanes.py); 0 here
        compute = flop / (c.compute_util * c.peak_flops) if c.compute_util > 0 else 0.0
        base.append([compute, net, tile_out * c.num_tile, tile_out, weight, flop, s])
    for i, e in enumerate(graph.edges):
        a, b = index[e.src], index[e.dst]
        coll = dm.conversion(graph, i, shardings[a], shardings[b])
        base[a][1] += base[a][2] * c.ratios.of(coll)  # charged where the producer runs (H)
    return [KernelCost(*row) for row in base]


_DEPTHS: dict[int, tuple[KernelGraph, dict[tuple[str, str], int]]] = {}


def buffer_depths(graph: KernelGraph) -> dict[tuple[str, str], int]:
    """inter_chip's buffer_depth: topological level of the consumer - of the producer + 1
    (kept per graph object: the exhaustive searches ask for it per configuration)."""
    held = _DEPTHS.get(id(graph))
    if held is None or held[0] is not graph:
        if len(_DEPTHS) > 16:
            _DEPTHS.clear()
        held = _DEPTHS[id(graph)] = (graph, dict(_depths(graph)))
    return held[1]


def _depths(graph: KernelGraph) -> tuple[tuple[tuple[str, str], int], ...]:
    level: dict[str, int] = {}
    for name in graph.topological_order():
        preds = [level[e.src] + 1 for e in graph.edges if e.dst == name]
        level[name] = max(preds, default=0)
    return tuple(((e.src, e.dst), level[e.dst] - level[e.src] + 1) for e in graph.edges)


def stage_two_problem(
    graph: KernelGraph,
    costs: Sequence[KernelCost],
    members: Sequence[int],
    c: StageTwo,
    max_configs: int,
    pins: Sequence[int] = (),
    cut: frozenset[tuple[str, str]] = frozenset(),
) -> MappingProblem:
    """The configurations of `members` (kernel indices, a topological order) under DFModel's
    numbers. An edge from outside `members` is read at its consumer every time; an edge to
    outside, or in `cut` (edges that always cross, e.g. forward -> backward), is written at
    its producer every time (pseudo-operand "to:<consumer>") and read at its consumer."""
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    pos = {k: p for p, k in enumerate(members)}

    def inner(e) -> bool:
        return index[e.src] in pos and index[e.dst] in pos and (e.src, e.dst) not in cut

    depth = buffer_depths(graph)
    menus = [_menu(graph, costs, k, c, inner, depth) for k in members]
    edges = [
        EdgeCost(pos[index[e.src]], pos[index[e.dst]], e.dst_operand, ((0.0,),))
        for e in graph.edges
        if inner(e)
    ]
    return MappingProblem(
        tuple(menus),
        tuple(sorted(edges, key=lambda x: (x.dst, x.src))),
        c.sram_bytes,
        c.dram_Bps,
        c.overlap,
        True,
        max_configs,
        tuple(pins),
        serialize_network=c.serialize_network,
    )


def _menu(graph: KernelGraph, costs, k: int, c: StageTwo, inner, depth) -> KernelMenu:
    """Kernel k's one option: DFModel's compute and network, the DRAM bytes of each edge
    end (the producer's output per chip), its SRAM."""
    index = {kern.name: i for i, kern in enumerate(graph.kernels)}
    kern, kc = graph.kernels[k], costs[k]
    traffic: list[tuple[str, float]] = []
    stream = 0.0
    for e in graph.edges:
        a, b = index[e.src], index[e.dst]
        if b == k:
            traffic.append((e.dst_operand, costs[a].out_bytes * kc.edge_scale))
        if a == k:
            stream += kc.tile_out_bytes * depth[(e.src, e.dst)]
            if not inner(e):
                traffic.append((f"to:{e.dst}", kc.out_bytes * kc.edge_scale))
    if any(inner(e) for e in graph.edges if e.src == kern.name):
        traffic.append(("out", kc.out_bytes))
    if memory_size(kern) > 0:  # DFModel's explicit memory_size: read whatever is fused
        traffic.append((MEMORY_SIZE, memory_size(kern) * kc.size_scale))
    buffer, _ = sram_parts(graph, costs, k, c)
    opt = Option(
        kc.sharding,
        "",
        kc.compute_s,
        kc.network_s,
        0.0,
        buffer,
        stream,
        tuple(traffic),
        flop_per_chip=kc.flop,
        sizes=tuple(traffic),
    )
    fed = tuple(n for n, _ in traffic if n not in ("out", MEMORY_SIZE) and not n.startswith("to:"))
    return KernelMenu(kern.name, (opt,), (kc.sharding,), fed, "out")


MEMORY_SIZE = "memory_size"  # the pseudo-operand of DFModel's explicit DRAM bytes


def memory_size(kernel) -> float:
    """DFModel's explicit memory_size of a kernel (bytes, as the float it stores)."""
    extra = kernel.dfmodel_extra
    return dm.f32(extra.memory_size_bytes) if extra is not None else 0.0


def sram_parts(graph: KernelGraph, costs, k: int, c: StageTwo) -> tuple[float, float]:
    """Kernel k's SRAM: (its buffers wherever it runs, the stream buffers its fused
    consumers add). DFModel's SRAM, conservatively: two tiles of every edge at each end
    (its D buffers of a crossing edge; depth x tile more when a consumer is fused, its B
    buffers) plus the weight. A weight kernel's tiling_factor divides its weight and its
    outgoing buffers and then the kernel runs alone: capped so that it fits alone, and
    nothing beside it."""
    index = {kern.name: i for i, kern in enumerate(graph.kernels)}
    kern, kc = graph.kernels[k], costs[k]
    depth = buffer_depths(graph)
    stream = sum(
        kc.tile_out_bytes * depth[(e.src, e.dst)] for e in graph.edges if e.src == kern.name
    )
    ins = 2 * sum(costs[index[e.src]].tile_out_bytes for e in graph.edges if e.dst == kern.name)
    outs = 2 * kc.tile_out_bytes * sum(1 for e in graph.edges if e.src == kern.name)
    extra = kern.dfmodel_extra
    weight = 0.0 if extra is not None and extra.skip_weight else kc.weight_bytes
    own = weight + outs
    if weight > 0:
        own = min(own, max(c.sram_bytes - ins, 0.0))
    return ins + own + (extra.sram_extra_bytes if extra is not None else 0.0), stream


def dram_bytes(
    graph: KernelGraph, costs: Sequence[KernelCost], config_of: dict[str, int]
) -> tuple[float, float]:
    """DFModel's DRAM per chip for one graph instance: (weights, activations). Weights: every
    weight per chip. Activations: the most, over configurations j, of the edges DFModel
    keeps in DRAM at j (its E matrix: an edge from configuration s to t is live at j when
    s <= j <= t, unless s == j == t), each the producer's output per chip."""
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    weights = sum(kc.weight_bytes for kc in costs)
    most = 0.0
    for j in sorted(set(config_of.values())):
        live = 0.0
        for e in graph.edges:
            s, t = config_of[e.src], config_of[e.dst]
            if s <= j <= t and not s == j == t:
                live += costs[index[e.src]].out_bytes
        most = max(most, live)
    return weights, most
