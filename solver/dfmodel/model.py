"""DFModel's own cost model (`--cost-model dfmodel`), as constants of MapShard's inner problem.

Source of the equations: fengqian-ayce/DFModel, src/inter_chip.py (sharding and layout
conversions) and src/intra_chip.py (latency, pipeline, System Cost and System Power), read at
commit 04f93d5. Facts only; the code is MapShard's. Units: seconds, bytes, bytes/s (DFModel
writes ns and GB/s, i.e. bytes per ns; the ratios below are the same numbers in SI).

Per kernel, with DFModel's sharding s (one of outer/M/K/N/none) over TP chips and its tiling
dim t cut into `num_tile` tiles (M counts outer * M):
  shard_X = ceil(X / TP) if X is sharded, ceil(X / num_tile) if X is tiled, else X
  FLOP    = 2 shard_M shard_K shard_N (SYSTOLIC) or shard_M shard_N (SIMD), x num_tile
  compute = FLOP / (compute_util * peak)              (DFModel's `util` branch)
  network = bytes(shard_M shard_N word) * num_tile * ratio(collective)
            + the layout conversions of its out-edges (charged at the producer, DFModel's H)
            + ALL_REDUCE_PERIODIC: bytes / micro-batches * ratio_dp (no num_tile)
            + link_latency x 2 (p_TP - 1) when its own collective is an all-reduce (newer
              schema, `all_reduce_alpha_s`)
  memory  = every edge with one end in the configuration: the producer's shard bytes x
            num_tile, at both ends (DFModel's D matrix); weights are not read from DRAM.
Collective ratios (seconds per byte) of a level of degree p and link bandwidth B:
  ring:   all-reduce (p-1)/(pB), all-to-all p^2/(8B), all-gather (p-1)/(pB)
  fc:     all-reduce 1/(pB),     all-to-all 1/B,      all-gather 1/(pB)
  switch: all-reduce (p-1)/(pB), all-to-all p/(4B),   all-gather (p-1)/(pB)
  DP all-reduce-periodic: (p-1)/(pB) on ring and switch, 1/(pB) on fc; PP point-to-point 1/B.
execution.separate_rs_ag_for_ar (DFModel's newer intra_chip.py; 04f93d5 has no such option)
charges an all-reduce as a reduce-scatter plus an all-gather: the TP all-reduce ratio doubles
(2(p-1)/(pB); on fc 2/(pB) as at commit f9cda5e, a33985b kept 1/(pB) there) and the DP one on
ring and switch (fc keeps 1/(pB)). DFModel's README example (GPT-3 1T, 1024 SN30) printed its
78.99 s at that rate (tests/data/dfmodel/SOURCES.md).
system.HBD (a high-bandwidth domain of that many chips on x's links) changes the TP and DP
all-reduce rates on a 3-D TP/PP/DP system (`hbd_ratios`, intra_chip.py @ 0e97740).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from generator.graph import Kernel, KernelGraph
from hardware.system import NetworkLevel, System, Topology
from schema.errors import SetupError

SHARDINGS = ("outer", "M", "K", "N", "none")
RR, RS, SR = "RR", "RS", "SR"  # replicated, column-sharded, row-sharded (inter_chip)
# layout produced by a kernel of each sharding (inter_chip's upstream rule)
PRODUCED = {"outer": SR, "M": SR, "K": RR, "N": RS, "none": RR}
# layout a consumer needs, per consumer class (inter_chip's downstream rules)
NEEDED = {
    "k_tiled": {"outer": SR, "M": SR, "K": RS, "N": SR, "none": RR},
    "simd": {"outer": SR, "M": SR, "K": RR, "N": RS, "none": RR},
    "tensor1": {"outer": SR, "M": RR, "K": SR, "N": RS, "none": RR},
    "tensor2": {"outer": SR, "M": SR, "K": RS, "N": RR, "none": RR},
}
# the conversion an edge pays (upstream layout, needed layout) -> collective; absent = none
CONVERSION = {(RS, RR): "all_gather", (RS, SR): "all_to_all", (SR, RR): "all_gather"}
CONVERSION[(SR, RS)] = "all_to_all"
_BASIC = {Topology.RING: "r", Topology.SWITCH: "sw", Topology.FULLY_CONNECTED: "fc"}


@dataclass(frozen=True)
class Ratios:
    """DFModel's seconds per byte of each collective under one parallel choice."""

    all_reduce: float = 0.0
    all_to_all: float = 0.0
    all_gather: float = 0.0
    all_reduce_periodic: float = 0.0
    p2p: float = 0.0

    def of(self, collective: str) -> float:
        return getattr(self, collective, 0.0) if collective else 0.0


def basic(level: NetworkLevel) -> str:
    """DFModel's basic topology of a level: r, sw or fc."""
    if level.kind not in _BASIC:
        raise SetupError(
            f"--cost-model dfmodel: topology level {level.name!r} is a {level.kind.value}; "
            "DFModel's equations know ring, switch and fully-connected levels only"
        )
    return _BASIC[level.kind]


def tp_ratios(
    kind: str, p: int, bw_Bps: float, separate_rs_ag: bool = False
) -> tuple[float, float, float]:
    """(all-reduce, all-to-all, all-gather) seconds per byte on a TP level; with
    `separate_rs_ag` (DFModel's separate_rs_ag_for_ar) the all-reduce is a reduce-scatter
    plus an all-gather, twice the bytes."""
    twice = 2 if separate_rs_ag else 1
    if kind == "fc":
        return twice / (p * bw_Bps), 1 / bw_Bps, 1 / (p * bw_Bps)
    a2a = p * p / (8 * bw_Bps) if kind == "r" else p / (4 * bw_Bps)
    return twice * (p - 1) / (p * bw_Bps), a2a, (p - 1) / (p * bw_Bps)


def dp_ratio(kind: str, p: int, bw_Bps: float, separate_rs_ag: bool = False) -> float:
    """ALL_REDUCE_PERIODIC seconds per byte on a DP level (DFModel doubles the ring and
    switch rates under separate_rs_ag_for_ar, not the fully-connected one)."""
    if kind == "fc":
        return 1 / (p * bw_Bps)
    return (2 if separate_rs_ag else 1) * (p - 1) / (p * bw_Bps)


def ratios(
    spans: dict[str, Sequence[tuple[NetworkLevel, int]]],
    separate_rs_ag: bool = False,
    levels: Sequence[NetworkLevel] = (),
    hbd: int = 0,
) -> Ratios:
    """The ratios of one choice; each parallelism spans at most one level (DFModel's
    par_x/y/z), whose degree is the parallel degree. `hbd` (system.HBD) on a 3-D system
    `levels` with TP, PP, DP on x, y, z: the all-reduces' rates of `hbd_ratios`."""
    tp = spans.get("tp", ())
    pp = spans.get("pp", ())
    dp = spans.get("dp", ())
    ar = a2a = ag = arp = p2p = 0.0
    if tp:
        ((lv, p),) = tp
        bw = stored_Bps(lv.link_bandwidth_Bps)
        ar, a2a, ag = tp_ratios(basic(lv), p, bw, separate_rs_ag)
    if dp:
        ((lv, p),) = dp
        arp = dp_ratio(basic(lv), p, stored_Bps(lv.link_bandwidth_Bps), separate_rs_ag)
    if pp:
        ((lv, _),) = pp
        p2p = 1 / stored_Bps(lv.link_bandwidth_Bps)
    if hbd > 0 and hbd_applies(levels):
        x, z = (span[0][1] if span else 1 for span in (tp, dp))
        ar, arp = hbd_ratios(levels, x, z, hbd)
    return Ratios(ar, a2a, ag, arp, p2p)


def hbd_applies(levels: Sequence[NetworkLevel]) -> bool:
    """DFModel reads system.HBD only on a 3-D topology with par_x TP, par_y PP, par_z DP
    (intra_chip.py @ 0e97740); elsewhere it is not read."""
    tags = [tuple(lv.parallelism) for lv in levels]
    return tags == [("TP",), ("PP",), ("DP",)]


def hbd_ratios(levels: Sequence[NetworkLevel], x: int, z: int, hbd: int) -> tuple[float, float]:
    """(TP all-reduce, DP all-reduce-periodic) seconds per byte with a high-bandwidth
    domain of `hbd` chips, whose links are x's (B0), on x, y, z of degrees X, Y, Z
    (intra_chip.py @ 0e97740; it has no separate_rs_ag_for_ar there, so none here):
      TP: hbd >= X: (X - 1) / (X B0) on any kind of level; else a two-level all-reduce,
          (hbd - 1) / (hbd B0) inside the domain plus (X / hbd - 1) / (X B1) across
      DP: hbd >= Z: (Z - 1) / (Z B0), the fast links; else (hbd - 1) / (hbd B0) plus
          (Z / hbd - 1) / (Z B2)."""
    b0, b1, b2 = (stored_Bps(lv.link_bandwidth_Bps) for lv in levels)
    inside = (hbd - 1) / (hbd * b0)
    tp = (x - 1) / (x * b0) if hbd >= x else inside + (x / hbd - 1) / (x * b1)
    dp = (z - 1) / (z * b0) if hbd >= z else inside + (z / hbd - 1) / (z * b2)
    return tp, dp


def all_reduce_alpha_s(spans: dict[str, Sequence[tuple[NetworkLevel, int]]]) -> float:
    """DFModel's link-latency term of one all-reduce (intra_chip.py @ 5ba2040, newer schema):
    accelerator.link_latency x 2 (p - 1) with p the TP level's degree, on any topology kind,
    once per kernel with an all-reduce in a configuration (not x num_tile). The seam
    (schema/dfmodel.py) put link_latency on every level as its latency."""
    tp = spans.get("tp", ())
    if not tp:
        return 0.0
    ((lv, p),) = tp
    return lv.latency_s * 2 * (p - 1)


def variant(system: System) -> str:
    """DFModel's topology variant of the system: "r", "sw_sw", "r_sw_sw", ..."""
    return "_".join(basic(lv) for lv in system.network)


def cost_power_counts(
    name: str, shape: Sequence[int], n: int, per_copy: int
) -> tuple[list[float], list[float]]:
    """(link counts, switch counts) per level of DFModel's variant `name` with level
    degrees `shape`; each count is multiplied by the level's GB/s and the unit price."""
    s = list(shape) + [1, 1, 1]  # every entry below is evaluated: pad to three levels
    table = {
        "": ([], []),  # one chip, no network: no link, no switch
        "sw": ([s[0]], [s[0]]),
        "fc": ([s[0] * (s[0] - 1)], [0]),
        "r": ([s[0]], [2]),
        "r_r": ([per_copy, per_copy], [2 * s[1], 2 * s[0]]),
        "fc_fc": ([s[0] * (s[0] - 1) * s[1], s[1] * (s[1] - 1)], [0, s[1] * s[1]]),
        "r_fc": ([per_copy, s[1] * (s[1] - 1)], [2 * s[1], s[1] * s[1]]),
        "r_sw": ([n, s[1]], [2 * s[1], s[1]]),
        "sw_sw": ([n, s[1]], [n, s[1]]),
        "r_r_r": ([per_copy] * 3, [2 * s[1] * s[2], 2 * s[0] * s[2], 2 * s[0] * s[1]]),
        "r_sw_sw": ([per_copy, s[1] * s[2], s[2]], [2 * s[1] * s[2], s[1] * s[2], s[2]]),
        "sw_sw_sw": ([per_copy, s[1] * s[2], s[2]], [per_copy, s[1] * s[2], s[2]]),
    }
    if name not in table:
        raise SetupError(f"--cost-model dfmodel: DFModel has no topology variant {name!r}")
    links, switches = table[name]
    return [float(x) for x in links], [float(x) for x in switches]


def f32(x: float) -> float:
    """DFModel stores its real-valued inputs (prices, powers, bandwidths, frequency, SRAM,
    compute_util, tensor sizes) as protobuf `float`: the value it computes with."""
    return struct.unpack("f", struct.pack("f", x))[0]


def stored_Bps(bandwidth_Bps: float) -> float:
    """A bandwidth as DFModel computes with it: its GB/s field stored as a float."""
    return f32(bandwidth_Bps / 1e9) * 1e9


def stored_peak(system: System, precision: str) -> float:
    """The peak FLOP/s DFModel computes with: 2 w h cores x its float-stored frequency."""
    ghz = system.chip.frequency_Hz / 1e9
    peak = system.chip.peak(precision)
    return peak / ghz * f32(ghz) if ghz > 0 else peak


def system_cost_power(
    system: System, shape: Sequence[int], num_copy: int = 1
) -> tuple[float, float]:
    """DFModel's System Cost ($) and System Power (W), summed in its order: DRAM +
    accelerators + links + switches; no link term on one chip per copy, no switch term at
    <= 4 chips per copy; every price, power and bandwidth as the float DFModel stores."""
    c, n = system.cost, system.num_chips
    per_copy = n // num_copy
    links, switches = cost_power_counts(variant(system), shape, n, per_copy)
    dram = f32(system.dram.bandwidth_Bps / 1e9)
    bws = [f32(lv.link_bandwidth_Bps / 1e9) for lv in system.network]
    link_power = list(c.link_unit_power) + [0.0] * (len(bws) - len(c.link_unit_power))
    link_cost = sum(lk * bw * f32(c.link_unit_price) for lk, bw in zip(links, bws)) * num_copy
    link_pw = sum(lk * bw * f32(p) for lk, bw, p in zip(links, bws, link_power)) * num_copy
    sw_cost = sum(sw * bw * f32(c.switch_unit_price) for sw, bw in zip(switches, bws)) * num_copy
    sw_pw = sum(sw * bw * f32(c.switch_unit_power) for sw, bw in zip(switches, bws)) * num_copy
    if per_copy < 2:
        link_cost = link_pw = 0.0
    if per_copy < 5:
        sw_cost = sw_pw = 0.0
    cost = n * dram * f32(c.dram_unit_price) + f32(c.accelerator_price) * n
    power = n * dram * f32(c.dram_unit_power) + f32(c.accelerator_power_W) * n
    return cost + link_cost + sw_cost, power + link_pw + sw_pw


# ---------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    """DFModel's view of a kernel: M counts outer * M; K is 1 for elementwise kernels."""

    outer: int
    M: int
    K: int
    N: int
    simd: bool
    tiling: str
    has_weight: bool


def dims_of(kernel: Kernel) -> Dims:
    d = kernel.dim_sizes
    outer = d.get("outer", 1)
    simd = (
        kernel.dfmodel_type == "SIMD" if kernel.dfmodel_type else not (kernel.kind.uses_matrix_unit)
    )
    has_weight = any(o.role.name == "WEIGHT" for o in kernel.operands)
    return Dims(
        outer,
        outer * d.get("M", 1),
        d.get("K", 1),
        d.get("N", 1),
        simd,
        kernel.dfmodel_tiling,
        has_weight,
    )


def legal_shardings(kernel: Kernel) -> tuple[str, ...]:
    """inter_chip's rules: no dim of size 1, never the tiling dim, a weight is always
    sharded, and a kernel with outer > 1 shards outer."""
    d = kernel.dim_sizes
    outer = d.get("outer", 1)
    if outer > 1:
        return ("outer",)
    dims = dims_of(kernel)
    out = []
    for s in SHARDINGS:
        if s == "outer" or (s != "none" and d.get(s, 1) == 1) or s == dims.tiling:
            continue
        if s == "none" and dims.has_weight:
            continue
        out.append(s)
    return tuple(out)


def shard_dims(dims: Dims, sharding: str, tp: int, num_tile: int) -> tuple[int, int, int]:
    """(shard_M, shard_K, shard_N) per chip and tile."""

    def one(name: str, size: int, sharded: bool) -> int:
        if sharded:
            return math.ceil(size / tp)
        if dims.tiling == name:
            return math.ceil(size / num_tile)
        return size

    return (
        one("M", dims.M, sharding in ("outer", "M")),
        one("K", dims.K, sharding == "K"),
        one("N", dims.N, sharding == "N"),
    )


def flop_per_tile(dims: Dims, shard: tuple[int, int, int]) -> float:
    m, k, n = shard
    return float(m * n) if dims.simd else 2.0 * m * k * n


def needed_layout(graph: KernelGraph, edge_index: int) -> dict[str, str]:
    """The consumer class of an edge (inter_chip): K-tiled (weight update), SIMD, a GEMM's
    tensor 1 (its input, or in1 when the bytes match) or tensor 2."""
    e = graph.edges[edge_index]
    by_name = {k.name: k for k in graph.kernels}
    dst, src = by_name[e.dst], by_name[e.src]
    dims = dims_of(dst)
    if dims.tiling == "K":
        return NEEDED["k_tiled"]
    if dims.simd or dims.has_weight:
        return NEEDED["simd"] if dims.simd else NEEDED["tensor1"]
    out_bytes = src.operand_bytes(src.outputs[0])
    in1 = next((o for o in dst.operands if o.name == "in1"), None)
    if in1 is not None and math.isclose(dst.operand_bytes(in1), out_bytes, rel_tol=1e-9):
        return NEEDED["tensor1"]
    return NEEDED["tensor2"] if e.dst_operand == "in2" else NEEDED["tensor1"]


def conversion(graph: KernelGraph, edge_index: int, src_sharding: str, dst_sharding: str) -> str:
    """The collective DFModel charges on an edge for a pair of shardings ('' = none)."""
    need = needed_layout(graph, edge_index)[dst_sharding]
    return CONVERSION.get((PRODUCED[src_sharding], need), "")


def own_collective(kernel: Kernel, sharding: str) -> str:
    """A kernel's own collective: the input's communication_type when given, else
    all-reduce of the output when K is sharded (inter_chip)."""
    given = kernel.communication.name.lower() if kernel.communication.name != "NONE" else ""
    if given:
        return {"point_to_point": "p2p"}.get(given, given)
    return "all_reduce" if sharding == "K" else ""
