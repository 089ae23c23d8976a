"""Building the per-kernel option menus (sharding x tiling) and per-edge layout-conversion
costs of one outer choice (the tensor-parallel group and where it sits in the topology), so
the MILP over them is linear; the data types are in solver/cost/problem.py."""

from __future__ import annotations

import math
from dataclasses import replace

from generator.graph import Kernel, KernelGraph, KernelKind, OperandRole, Pass
from hardware.system import Chip
from solver.cost import causal_attention, efficiency, frontier, kernel_times, memo
from solver.cost.gemm_roles import compulsory_bytes, gemm_roles, is_gemm
from solver.cost.layouts import conversion_groups, conversion_table, rs_dim
from solver.cost.named_menus import menu_by_value
from solver.cost.own_network import own_network
from solver.cost.problem import (
    REPLICATED,
    EdgeCost,
    KernelMenu,
    MappingProblem,
    Option,
    Span,
    TileCost,
    TileGroup,
)
from solver.cost.tilings import fusion_args, held_tiles, kept_tilings, tile_costs
from solver.cost.weights import (
    WeightRule,
    per_step_gradient_reduction,
    weight_facts,
    weight_storage,
)
from solver.options import ExecutionOptions

# --------------------------------------------------------------------------------------
# Building menus
# --------------------------------------------------------------------------------------


def sharding_choices(kernel: Kernel, tp: int) -> list[str]:
    """Loop dims a kernel may split across the tensor-parallel group (plus replication)."""
    if tp <= 1:
        return [REPLICATED]
    sizes = kernel.dim_sizes
    allowed = kernel.shardable_dims or tuple(d for d, _ in kernel.dims)
    choices = [REPLICATED]
    out_dims = {d for o in kernel.outputs for d in o.dims}
    for d in allowed:
        if sizes.get(d, 0) >= tp:
            choices.append(d)
            if d not in out_dims and rs_dim(kernel, tp):
                choices.append(f"{d}+rs")
    if kernel.must_split and len(choices) > 1:
        choices.remove(REPLICATED)
    if kernel.pinned_sharding:
        pinned = [c for c in choices if c == kernel.pinned_sharding]
        return pinned or [REPLICATED]
    return choices


def _shard_sizes(kernel: Kernel, sharding: str, tp: int) -> dict[str, int]:
    sizes = dict(kernel.dim_sizes)
    split = sharding.split("+")[0]
    if split != REPLICATED and tp > 1:
        sizes[split] = math.ceil(sizes[split] / tp)
    return sizes


def _routed_sizes(kernel: Kernel, sizes: dict[str, int]) -> dict[str, int]:
    """The per-chip sizes the kernel runs: of an MoE layer's experts only those tokens are
    routed to (Kernel.expert_share), every expert otherwise. Split over chips, the step
    waits on the chip whose experts drew the most (`busiest_experts`). Its FLOP already
    counts the routed token slots only."""
    if kernel.expert_share >= 1.0 or "experts" not in sizes:
        return sizes
    per_chip, whole = sizes["experts"], kernel.dim_sizes["experts"]
    routed = dict(sizes)
    routed["experts"] = busiest_experts(per_chip, kernel.expert_share, -(-whole // per_chip))
    return routed


def launch_count(kernel: Kernel, tp: int) -> int:
    """The launches an option of the kernel stands for, one kernel overhead each:
    Kernel.launches, times the experts the chip runs when it issues them expert by expert
    (Kernel.per_expert_launches): the fewest of any of its shardings, as a menu has one
    overhead (an MoE layer's expert kernels have their sharding pinned: one count)."""
    if not kernel.per_expert_launches or GROUPED_DIM not in kernel.dim_sizes:
        return kernel.launches
    experts = min(
        _routed_sizes(kernel, _shard_sizes(kernel, s, tp))[GROUPED_DIM]
        for s in sharding_choices(kernel, tp)
    )
    return kernel.launches * experts


def busiest_experts(experts: int, share: float, chips: int) -> int:
    """Experts reached on the busiest of `chips` chips holding `experts` each, each expert
    reached with probability `share`: the expected maximum of `chips` Binomial(experts,
    share) counts, sum over m >= 1 of 1 - P(count < m)^chips, rounded up (one chip: the
    expected count experts x share, rounded up)."""
    if chips <= 1:
        return max(1, math.ceil(experts * share - 1e-9))
    below, expected, pmf = 0.0, 0.0, (1.0 - share) ** experts
    for m in range(experts):
        below += pmf  # P(count <= m)
        expected += 1.0 - below**chips
        pmf *= (experts - m) / (m + 1) * share / (1.0 - share)
    return max(1, min(experts, math.ceil(expected - 1e-9)))


def _matrix_precision_peak(chip: Chip, precision: str) -> float:
    return chip.peak(precision)


def build_menu(
    kernel: Kernel,
    chip: Chip,
    tp: int,
    tp_span: Span,
    group_spans: dict[str, Span],
    sram_bytes: float,
    math_precision: str,
    dataflow: bool,
    tiling_points: int = 10,
    weights: WeightRule | None = None,
    held_instances: int = 1,
) -> KernelMenu:
    """Every (sharding, tile) option of the kernel; `held_instances` > 1 (DATAFLOW: that
    many graph instances run each configuration back to back) adds `held_tiles`."""
    options: list[Option] = []
    held: dict[str, tuple[str, float, dict[str, float], float]] = {}
    shardings = sharding_choices(kernel, tp)
    full_elems = math.prod(kernel.dim_sizes.values())
    out_bytes_full = sum(kernel.operand_bytes(o) for o in kernel.outputs)
    for s in shardings:
        sharded = _shard_sizes(kernel, s, tp)
        flop = kernel.flop * (math.prod(sharded.values()) / full_elems if full_elems else 1.0)
        sizes = _routed_sizes(kernel, sharded)
        compute = _kernel_time(kernel, chip, sizes, flop, math_precision, sharded)
        net_s, net_b, coll = own_network(kernel, s, tp, tp_span, group_spans, out_bytes_full)
        stored, replicated = (), ()
        if weights is not None:
            stored, replicated = weight_storage(kernel, s, tp)
        compulsory = compulsory_bytes(kernel, sizes)
        tiles = kept_tilings(kernel, sizes, sram_bytes, dataflow, tiling_points)
        if dataflow and held_instances > 1:
            extra = held_tiles(kernel, sizes, sram_bytes, held_instances)
            if kernel.pinned_tile:  # a pin is that tile: held when it holds the weight
                extra = [t for t in extra if t[0] in {x[0] for x in tiles}]
            held.update((s, t) for t in extra)
            tiles += extra
        for tile, buf, traffic, out_tile in tiles:
            options.append(
                Option(
                    s,
                    tile,
                    compute.seconds,
                    net_s,
                    net_b,
                    buf,
                    out_tile,
                    tuple(sorted(traffic.items())),
                    coll,
                    flop,
                    stored,
                    replicated,
                    tuple(sorted(compulsory.items())),
                    compute.source,
                    compute.floor_s,
                )
            )
    inputs = tuple(o.name for o in kernel.inputs if o.role != OperandRole.WEIGHT)
    outputs = kernel.outputs
    groups: list[TileGroup] = []
    if dataflow and is_gemm(kernel) and not kernel.pinned_tile:
        for s in shardings:
            sizes = _routed_sizes(kernel, _shard_sizes(kernel, s, tp))
            for pts in frontier.tile_groups(*fusion_args(kernel, sizes, sram_bytes, tiling_points)):
                costs = tile_costs(kernel, sizes, sram_bytes, pts)
                groups.append(TileGroup(s, tuple(TileCost(*c) for c in costs)))
            if s in held:  # the held tile is a tile of the exact menu too (tile_refine)
                tile, buf, traffic, out = held[s]
                groups.append(
                    TileGroup(s, (TileCost(tile, buf, out, tuple(sorted(traffic.items()))),))
                )
    return KernelMenu(
        name=kernel.name,
        options=tuple(options),
        shardings=tuple(dict.fromkeys(o.sharding for o in options)),
        input_operands=inputs,
        output_operand=outputs[0].name if outputs else "",
        overhead_s=chip.efficiency.kernel_overhead_s * launch_count(kernel, tp),
        tile_groups=tuple(groups),
    )


def _compute_time(
    kernel: Kernel, chip: Chip, sizes: dict[str, int], flop: float, precision: str
) -> float:
    """Compute time of one option (seconds of `_kernel_time`)."""
    return _kernel_time(kernel, chip, sizes, flop, precision, sizes).seconds


def _kernel_time(
    kernel: Kernel,
    chip: Chip,
    sizes: dict[str, int],
    flop: float,
    precision: str,
    sharded: dict[str, int],
) -> kernel_times.KernelTime:
    """Compute time of one option and its source (`kernel_times.kernel_compute_time`: a
    measured table, the calibrated roofline, or the peak); `sharded`: its sizes before
    routing (a host loop runs every expert on the chip, reached or not)."""
    shape = None
    if is_gemm(kernel):
        _, _, _, batch, m, n, k = gemm_roles(kernel)
        shape = kernel_times.GemmShape(
            math.prod(sizes[d] for d in m),
            math.prod(sizes[d] for d in n),
            math.prod(sizes[d] for d in k),
            math.prod(sizes[d] for d in batch),
            grouped=GROUPED_DIM in batch and not kernel.fused_experts,
        )
    return kernel_times.kernel_compute_time(
        kernel,
        chip,
        shape,
        flop,
        precision,
        _decode_shape(kernel, sizes),
        math.prod(sizes.values()),
        causal_attention.kernel_shape(kernel, sizes),
        sharded.get(GROUPED_DIM, 0),
    )


def _decode_shape(
    kernel: Kernel, sizes: dict[str, int]
) -> kernel_times.DecodeAttentionShape | None:
    """The per-chip extents of a decode attention kernel (one query token per sequence
    against a KV cache, generator/llm_layer.py), None for any other kernel."""
    if kernel.kind != KernelKind.ATTENTION or sizes.get("q_seq") != 1:
        return None
    cache = [o for o in kernel.operands if o.role == OperandRole.KV_CACHE]
    need = ("batch", "kv_heads", "group", "head_dim", "kv_seq")
    if not cache or any(d not in sizes for d in need):
        return None
    return kernel_times.DecodeAttentionShape(
        sizes["batch"],
        sizes["kv_heads"] * sizes["group"],
        sizes["kv_heads"],
        sizes["head_dim"],
        sizes["kv_seq"],
        cache[0].bytes_per_element,
    )


# a matrix kernel batched over this dim is an MoE layer's grouped GEMM (one GEMM per expert,
# kernel_times.GemmShape.grouped), not one batched kernel
GROUPED_DIM = "experts"


def best_compute_rate(kernel: Kernel, chip: Chip, precision: str) -> float:
    """The highest FLOP/s any option of `kernel` reaches (`_compute_time` never runs it
    faster): the matrix peak at the workload's math precision times the GEMM plateau (the
    roll-off and occupancy factors are at most 1), or a measured table's best point where
    one covers the chip (`kernel_times.best_gemm_rate`), or the fused-attention efficiency
    (a causal kernel's executed tiles where the chip prices them so), the vector rate for
    the rest. `chip` is the chip after `efficiency.for_precision`; a
    kernel at its own precision (`Kernel.math_precision`) takes that precision's peak and
    plateau."""
    if kernel.flop <= 0:
        return math.inf
    if kernel.math_precision and kernel.math_precision != precision:
        precision = kernel.math_precision
        chip = efficiency.for_precision(chip, precision)
    if kernel.unit != "vector" and (
        is_gemm(kernel) or kernel.kind.uses_matrix_unit or kernel.unit == "matrix"
    ):
        eff = chip.efficiency
        util = eff.fixed_compute_util or (eff.gemm_util or 1.0)
        if kernel.kind == KernelKind.ATTENTION and not is_gemm(kernel):
            rate = kernel_times.attention_rate(chip, precision)
            causal = causal_attention.kernel_shape(kernel, kernel.dim_sizes)
            if causal is not None:  # the executed tiles' products (the share any split keeps)
                tiled = kernel_times.causal_attention_rate(kernel, chip, causal, precision)
                rate = max(rate, tiled)
            return rate
        rate = _matrix_precision_peak(chip, precision) * max(util, 1e-3)
        return kernel_times.best_gemm_rate(chip, precision, rate) if is_gemm(kernel) else rate
    if kernel.kind == KernelKind.ATTENTION:
        return chip.vector_flops  # FMAs at the vector peak (kernel_times.vector_attention_time)
    return kernel_times.vector_peak(chip, precision) * efficiency.vector_efficiency(chip)


def block_limited(kernel: Kernel, menu: KernelMenu, cores: int, dram_Bps: float) -> KernelMenu:
    """A kernel on `kernel.thread_blocks` of the chip's `cores` moves its compulsory bytes at
    that share of the achieved DRAM bandwidth `dram_Bps`: a latency-bound step done by one
    cooperating thread block (HPL's pivot column) cannot draw on the other cores' memory
    requests. Charged as the option's compute time, the kernel's own issue limit; the
    chip-wide DRAM time stays the memory time beside it."""
    if kernel.thread_blocks <= 0 or kernel.thread_blocks >= cores or dram_Bps <= 0:
        return menu
    rate_Bps = dram_Bps * kernel.thread_blocks / cores
    source = f"{kernel.thread_blocks} of {cores} cores: their share of DRAM bandwidth"
    return _streaming_floor(menu, rate_Bps, source)


# torch._grouped_mm takes its 64 x 128 tile kernel at this many tokens per expert (the
# average over the experts) or fewer, its 128 x 256 one above (ATen GroupMM.cu)
TORCH_GROUPED_SMALL_TOKENS = 128
TORCH_GROUPED_SOURCE = "torch._grouped_mm small-tile streaming (measured)"


def torch_grouped_streaming(
    kernel: Kernel, menu: KernelMenu, chip: Chip, peak_Bps: float
) -> KernelMenu:
    """An expert GEMM run as torch._grouped_mm (Kernel.torch_grouped) at no more than 128
    tokens per expert moves its compulsory bytes at the chip's grouped_mm_dram_share of the
    DRAM peak `peak_Bps` (its small-tile kernel streams below the copy rate). Charged as
    the option's compute time, as `block_limited` does."""
    share = chip.efficiency.grouped_mm_dram_share
    tokens = kernel.dim_sizes.get("expert_tokens", 0)
    if not kernel.torch_grouped or share <= 0 or tokens > TORCH_GROUPED_SMALL_TOKENS:
        return menu
    return _streaming_floor(menu, peak_Bps * share, TORCH_GROUPED_SOURCE)


def _streaming_floor(menu: KernelMenu, rate_Bps: float, source: str) -> KernelMenu:
    """Every option's compute time raised to its compulsory bytes at `rate_Bps`."""
    options = []
    for o in menu.options:
        streaming_s = sum(b for _, b in o.sizes) / rate_Bps
        if streaming_s > o.compute_s:
            o = replace(o, compute_s=streaming_s, time_source=source, floor_s=0.0)
        options.append(o)
    return replace(menu, options=tuple(options))


def build_problem(
    graph: KernelGraph,
    chip: Chip,
    dram_bandwidth_Bps: float,
    tp: int,
    tp_span: Span,
    group_spans: dict[str, Span],
    math_precision: str,
    dataflow: bool,
    overlap: bool,
    max_configs: int,
    tiling_points: int = 10,
    serialize_network: bool = False,
    micro_batches: int = 1,
    weights: WeightRule | None = None,
    network_hidden_share: float = 0.0,
    held_instances: int = 1,
) -> MappingProblem:
    """`micro_batches`: graph instances per step that accumulate weight gradients (training:
    global batch / (micro-batch x DP)); a weight gradient's TP reduction runs once per step,
    so each instance carries 1/micro_batches of it. `held_instances`: independent graph
    instances per step that run each configuration back to back (`held_tiles`).
    `max_configs`: the setup's num_config, read by ExecutionOptions.config_budget."""
    order = graph.canonical_order()
    index = {name: i for i, name in enumerate(order)}
    kernels = [graph.kernel(n) for n in order]
    sram = chip.sram_bytes
    # memoised by value (solver.cost.memo, named_menus): a sweep rebuilds the same menus
    # point after point; the key holds every argument build_menu / conversion_table read
    tp_key, spans_key = memo.value_key(tp_span), memo.value_key(tp_span, group_spans)
    key = (memo.value_key(chip), tp, spans_key, math_precision, dataflow, tiling_points)
    key += (weights, held_instances)
    args = (chip, tp, tp_span, group_spans, sram, math_precision, dataflow, tiling_points)
    args += (weights, held_instances)
    eff_bw = efficiency.achieved_dram_Bps(chip, dram_bandwidth_Bps)
    menus = []
    for k in kernels:
        menu = block_limited(k, menu_by_value(k, build_menu, key, args), chip.cores, eff_bw)
        menu = torch_grouped_streaming(k, menu, chip, dram_bandwidth_Bps)
        menus.append(per_step_gradient_reduction(k, menu, tp, tp_span, micro_batches))
    edges, raw = [], []
    wraps = [(e, True) for e in graph.boundary]
    for e, wrap in [(e, False) for e in graph.edges] + wraps:
        u, v = index[e.src], index[e.dst]
        src, dst = kernels[u], kernels[v]
        tensor = e.tensor_bytes or sum(src.operand_bytes(o) for o in src.outputs)
        shardings = (menus[u].shardings, menus[v].shardings)
        key = (src, dst, e.dst_operand, e.dim_map, tensor, shardings, tp, tp_key)
        args = (src, dst, e.dst_operand, dict(e.dim_map), tensor, shardings, tp, tp_span)
        conv = memo.CONVERSIONS.get(key, conversion_table, *args)
        if wrap and not any(c > 0 for row in conv for c in row):
            continue
        saved = src.pass_ == Pass.FWD and dst.pass_ != Pass.FWD
        edges.append(EdgeCost(u, v, e.dst_operand, conv, saved=saved, wrap=wrap))
        raw.append((e, wrap))
    edges = conversion_groups(edges, kernels, menus, raw)
    pinned = tuple(k.pinned_config for k in kernels)
    budget = ExecutionOptions(dataflow=dataflow, num_config=max_configs)
    return MappingProblem(
        kernels=tuple(menus),
        edges=tuple(edges),
        sram_bytes=sram,
        dram_bandwidth_Bps=eff_bw,
        overlap=overlap,
        dataflow=dataflow,
        max_configs=budget.config_budget(len(menus)),
        pinned_configs=pinned,
        serialize_network=serialize_network,
        network_hidden_share=network_hidden_share,
        resident_bytes_per_param=weights.bytes_per_param if weights else 0.0,
        weight_facts=weight_facts(kernels) if weights else (),
    )
