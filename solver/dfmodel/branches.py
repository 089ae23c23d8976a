"""DFModel's DLRM and HPL branches (`execution { dlrm {...} }`, `execution { hpl {...} }`)
as constants of MapShard's inner problem, for `--cost-model dfmodel`.

Source: fengqian-ayce/DFModel src/intra_chip.py @ 04f93d5 (its `dlrm` and `hpl` branches);
facts only, the code is MapShard's. Chips per copy P = num_chip / num_copy; num_tile = 1.

DLRM (data parallelism over copies, embedding all-to-all): TP = PP = 1, DP = P; every
kernel runs whole (shard = (M, K, N)).
  all-to-all: an ALL_TO_ALL kernel moves communication_size / P bytes per chip (0 on one
    chip), at the slowest level's msg_j / (link_bw_j x bw_j): the same per-level factors
    as the FFT branch (solver/dfmodel/fft.py)
  ALL_REDUCE_PERIODIC: its output bytes / micro-batches (global_batch / P), charged as
    that many nanoseconds. DFModel's row for DLRM compares the bytes with the latency
    directly (no link bandwidth, unlike its LLM branch): taken literally, i.e. 1 GB/s;
    ambiguous in DFModel, none of its DLRM inputs uses it
  step = sum_c II_c x global_batch / P / num_copy (DFModel's objective is final_ns with
    final_ns x num_copy >= the step, in every branch); DRAM per chip = weights + the most
    live edges + num_table x row x emb_dim x word / P; SRAM row as for LLM graphs.
HPL (process grid, panel broadcasts): TP = PP = DP = 1; the P chips form an X x Y grid:
  one level: X = 1, Y = x; two: X = x, Y = y; three: X = x y, Y = z
  shard = (ceil(M / X), ceil(K / Y), N)
  BROADCAST (communication_type): communication_size / X bytes per chip (0 when X = 1)
  POINT_TO_POINT (communication_type_2): communication_size / Y (0 when Y = 1) -- DFModel
    divides the *first* size here too (communication_size_2 is read but unused)
  a configuration's network = max(sum P2P / link_bw_x, sum BROADCAST / link_bw_y)
    (DFModel indexes the first two levels whatever the grid; one level has no second
    link and DFModel fails on it: refused here)
  step = sum_c II_c / num_copy; DRAM per chip = n^2 x word / P; no SRAM row.
"""

from __future__ import annotations

import math

import solver.dfmodel.model as dm
from generator.graph import Communication, KernelGraph
from hardware.system import System
from schema.errors import SetupError
from solver.dfmodel.problem import KernelCost

NS = 1e-9  # DFModel's latencies are in ns


def dlrm_kernel_costs(
    graph: KernelGraph,
    per_copy: int,
    word_bytes: float,
    micro_batches: int,
    a2a_s_per_byte: float,
) -> list[KernelCost]:
    """Every kernel's DLRM numbers; compute_s is left 0 (the caller's compute model)."""
    costs = []
    for k in graph.kernels:
        dims = dm.dims_of(k)
        shard = (dims.M, dims.K, dims.N)
        flop = dm.flop_per_tile(dims, shard)
        out = dims.M * dims.N * word_bytes
        net = 0.0
        if k.communication == Communication.ALL_TO_ALL and per_copy > 1:
            net = dm.f32(k.communication_bytes) / per_copy * a2a_s_per_byte
        elif k.communication == Communication.ALL_REDUCE_PERIODIC:
            net = out / max(micro_batches, 1) * NS
        weight = dims.M * dims.K * word_bytes if dims.has_weight else 0.0
        costs.append(KernelCost(0.0, net, out, out, weight, flop, "none"))
    return costs


def hpl_grid(system: System, per_copy: int) -> tuple[int, int]:
    """(X, Y): DFModel's HPL_sharding_factor_X / _Y of the topology's levels."""
    dims = [lv.degree for lv in system.network]
    if len(dims) < 2:
        raise SetupError(
            "--cost-model dfmodel: DFModel's HPL branch needs a two- or three-level topology "
            f"(its network row reads link_bw_x and link_bw_y); this one has {len(dims)}"
        )
    if math.prod(dims) != per_copy:
        raise SetupError(
            f"--cost-model dfmodel: DFModel's HPL branch needs the topology's chips "
            f"({math.prod(dims)}) = num_chip / num_copy ({per_copy})"
        )
    if len(dims) == 2:
        return dims[0], dims[1]
    return dims[0] * dims[1], dims[2]


def hpl_kernel_costs(graph: KernelGraph, grid: tuple[int, int], word_bytes: float):
    """(KernelCost list with compute_s and network_s 0, per-kernel (p2p, broadcast) bytes
    per chip): a configuration's network is max(sum p2p / bw_x, sum bcast / bw_y)."""
    x, y = grid
    costs, comm = [], []
    for k in graph.kernels:
        dims = dm.dims_of(k)
        shard = (math.ceil(dims.M / x), math.ceil(dims.K / y), dims.N)
        flop = dm.flop_per_tile(dims, shard)
        out = shard[0] * shard[2] * word_bytes
        size = dm.f32(k.communication_bytes)
        bcast = size / x if k.communication == Communication.BROADCAST and x > 1 else 0.0
        p2p = size / y if k.communication_2 == Communication.POINT_TO_POINT and y > 1 else 0.0
        weight = shard[0] * shard[1] * word_bytes if dims.has_weight else 0.0
        costs.append(KernelCost(0.0, 0.0, out, out, weight, flop, "none"))
        comm.append((p2p, bcast))
    return costs, comm
