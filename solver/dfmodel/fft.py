"""DFModel's FFT branch (`execution { fft { length num_copy } }`) as constants of MapShard's
inner problem, for `--cost-model dfmodel`.

Source: fengqian-ayce/DFModel src/intra_chip.py (its `fft` branch) at commit 04f93d5; facts
only, the code is MapShard's. inter_chip.py leaves every kernel of a non-LLM graph
unsharded and keeps the input's communication_type; intra_chip.py then:
  chips per copy P = num_chip / num_copy; TP = PP = DP = 1; num_tile = 1
  every kernel: shard (M, K, N) = (M, K, ceil(N / P))          (no TP, no tiling)
             (DFModel writes this for its FFT graphs' two kernels, Step_1 and Step_2;
             MapShard applies it to every kernel of the graph)
  compute  = FLOP / (compute_util x peak), FLOP = 2 M K shard_N (SIMD: M shard_N)
  memory   = every edge with one end in the configuration, the producer's
             M x shard_N x word, at both ends (the D matrix), over DRAM bandwidth
  network  = an ALL_TO_ALL kernel moves communication_size / P^2 bytes per chip (0 on one
             chip); a configuration's all-to-all time is the slowest level j of
             bytes x msg_j / (link_bw_j x bw_j)  (the per-level factors below)
  step     = sum over configurations (no pipeline factor, no p2p); no SRAM row; DRAM use
             = length x word / P.
Per-level all-to-all factors (bw_j, msg_j) of each DFModel topology variant, with level
sizes x, y, z and T(a) = a (a - 1) / 2:
  sw (x, T(P)); fc (x^2/4, T(P)); r (2, T(P)); r_r (2x, T(P)), (2y, T(P));
  fc_fc (x^2/4, T(x)), (y^2/4, T(P)); r_fc (2, T(x)), (y^2/4, T(P));
  r_sw (2, T(x)), (y, T(P)); sw_sw (x, T(x)), (y, T(P));
  r_r_r (2xy, T(P)), (2xz, T(P)), (2yz, T(P));
  r_sw_sw (2, T(x)), (y, T(xy)), (z, T(P)); sw_sw_sw (x, T(x)), (y, T(xy)), (z, T(P)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import solver.dfmodel.model as dm
from generator.graph import Communication, KernelGraph
from hardware.system import System
from schema.errors import SetupError
from solver.dfmodel.problem import KernelCost


def _tri(a: float) -> float:
    return a * (a - 1) / 2


def a2a_factors(name: str, dims: Sequence[int], per_copy: int) -> list[tuple[float, float]]:
    """(bw factor, message factor) per level of DFModel's topology variant `name`."""
    s = list(dims) + [1, 1, 1]
    x, y, z, p = s[0], s[1], s[2], _tri(per_copy)
    table = {
        "sw": [(x, p)],
        "fc": [(x * x / 4, p)],
        "r": [(2, p)],
        "r_r": [(2 * x, p), (2 * y, p)],
        "fc_fc": [(x * x / 4, _tri(x)), (y * y / 4, p)],
        "r_fc": [(2, _tri(x)), (y * y / 4, p)],
        "r_sw": [(2, _tri(x)), (y, p)],
        "sw_sw": [(x, _tri(x)), (y, p)],
        "r_r_r": [(2 * x * y, p), (2 * x * z, p), (2 * y * z, p)],
        "r_sw_sw": [(2, _tri(x)), (y, _tri(x * y)), (z, p)],
        "sw_sw_sw": [(x, _tri(x)), (y, _tri(x * y)), (z, p)],
    }
    if name not in table:
        raise SetupError(
            f"--cost-model dfmodel: DFModel's FFT branch has no all-to-all model for the "
            f"topology variant {name!r}"
        )
    return [(float(b), float(m)) for b, m in table[name]]


def a2a_seconds_per_byte(system: System, per_copy: int) -> float:
    """Seconds per all-to-all byte (per chip): the slowest level's msg / (bw x factor)."""
    dims = [lv.degree for lv in system.network]
    factors = a2a_factors(dm.variant(system), dims, per_copy)
    return max(
        (m / (dm.stored_Bps(lv.link_bandwidth_Bps) * b) if b > 0 else 0.0)
        for lv, (b, m) in zip(system.network, factors)
    )


def chips_per_copy(system: System, num_copy: int) -> int:
    """DFModel's num_chips_per_copy: num_chip / num_copy, which its topology must span."""
    n, copies = system.num_chips, max(num_copy, 1)
    dims = math.prod(lv.degree for lv in system.network)
    if n % copies or (system.network and dims != n // copies):
        raise SetupError(
            f"--cost-model dfmodel: DFModel's FFT branch needs num_chip ({n}) = num_copy "
            f"({copies}) x the topology's chips ({dims})"
        )
    return n // copies


def fft_kernel_costs(
    graph: KernelGraph,
    per_copy: int,
    word_bytes: float,
    compute_util: float,
    peak_flops: float,
    a2a_s_per_byte: float,
) -> list[KernelCost]:
    """Every kernel's DFModel numbers in its FFT branch (module docstring)."""
    costs = []
    for k in graph.kernels:
        dims = dm.dims_of(k)
        shard = (dims.M, dims.K, math.ceil(dims.N / per_copy))
        flop = dm.flop_per_tile(dims, shard)
        out = shard[0] * shard[2] * word_bytes
        net = 0.0
        if k.communication == Communication.ALL_TO_ALL and per_copy > 1:
            per_chip = dm.f32(k.communication_bytes) / (per_copy * per_copy)
            net = per_chip * a2a_s_per_byte
        compute = flop / (compute_util * peak_flops) if compute_util > 0 else 0.0  # 0: lanes
        costs.append(KernelCost(compute, net, out, out, 0.0, flop, "N" if per_copy > 1 else "none"))
    return costs
