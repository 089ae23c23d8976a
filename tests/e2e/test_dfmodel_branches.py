"""`--cost-model dfmodel` on DFModel's HPL and DLRM branches and its lane/stage compute
(compute_util 0), against numbers derived by hand from DFModel's equations
(fengqian-ayce/DFModel src/intra_chip.py @ 04f93d5; the SSM file's own commit b9a3e2f for
its unset sram_cap). Files: tests/data/dfmodel (SOURCES.md)."""

from __future__ import annotations

import csv
import itertools
import json
import math
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard.cli import main
from schema import setup_pb2
from solver.dfmodel.lanes import config_cycles, lane_kernel

DATA = Path(__file__).resolve().parents[1] / "data" / "dfmodel"
GHZ_1_6 = 1.600000023841858  # freq 1.6 as the protobuf float DFModel computes with


def _run(name: str, out: Path) -> tuple[dict, list[dict]]:
    args = ["run", str(DATA / name), "--out", str(out), "--cost-model", "dfmodel", "--quiet"]
    assert main(args) == 0
    with (out / "configs.csv").open() as f:
        configs = list(csv.DictReader(f))
    return json.loads((out / "summary.json").read_text()), configs


def test_hpl_4k_process_grid_and_panel_broadcasts(tmp_path: Path) -> None:
    """damsim_hpl_4k.txt: r_r 4 x 4 at 10 GB/s, 16 chips, num_copy 1 -> grid X = 4, Y = 4;
    two SYSTOLIC gemm_input1_input2 kernels (4096 x 4096 x 32, 4064 x 4064 x 32), one
    configuration (num_config 1), lane/stage compute (compute_util unset) on 1040 cores
    of 32 x 6, no overlap.
      shards: (ceil(4096/4), ceil(4096/4), 32) = (1024, 1024, 32); (1016, 1016, 32)
      cycles = ceil(M / (32 lane)) x ceil(32 / (6 stage)) x K: lane 32, stage 6 (192 cores
        each, 384 <= 1040) -> 1 x 1 x 1024 = 1024 and 1 x 1 x 1016 = 1016; the slower
        kernel cannot go below K = 1024 cycles -> compute = 1024 / 1.6 GHz = 640 ns
      memory: the one edge stays inside the configuration, no memory_size -> 0
      network: POINT_TO_POINT (communication_type_2) of communication_size / Y:
        262,144/4 + 260,096/4 = 130,560 B over link_bw_x 10 GB/s = 13,056 ns;
        BROADCAST of communication_size / X: the same 130,560 B over link_bw_y = 13,056 ns;
        network = max = 13,056 ns
      no overlap: II = 640 + 0 + 13,056 = 13,696 ns; HPL's step = the sum of the IIs."""
    s, cfgs = _run("damsim_hpl_4k.txt", tmp_path / "df")
    assert s["status"] == "optimal"
    assert s["latency_s"] == pytest.approx(1024 / GHZ_1_6 * 1e-9 + 13_056e-9, rel=1e-12)
    assert [c["kernels"] for c in cfgs] == ["Iteration_1;Iteration_2"]
    assert float(cfgs[0]["compute_s"]) == pytest.approx(640e-9, rel=1e-7)
    assert float(cfgs[0]["network_s"]) == pytest.approx(13_056e-9, rel=1e-12)
    assert any("PMU place-and-route rows" in w for w in s["warnings"])
    # DFModel's HPL DRAM row: n^2 x word / chips = 4096^2 x 2 / 16 = 2,097,152 B
    assert s["memory_breakdown_bytes"]["activations"] == 2_097_152.0
    # dse_final.txt as DFModel's own (DAMSim/HPL/4K/dse_final.txt @ 04f93d5): the grid's
    # shards, NO_SHARDING, the edge's 1024 x 32 x 2 = 65,536 B, a LANE input
    final = text_format.Parse((tmp_path / "df" / "dse_final.txt").read_text(), setup_pb2.Setup())
    shards = [
        (k.gemm_input1_input2.shard_outer_M, k.gemm_input1_input2.shard_K,
         k.gemm_input1_input2.shard_N, k.gemm_input1_input2.sharding)
        for k in final.dataflow_graph.kernels
    ]  # fmt: skip
    none = setup_pb2.NO_SHARDING
    assert shards == [(1024, 1024, 32, none), (1016, 1016, 32, none)]
    (edge,) = final.dataflow_graph.connections
    assert (edge.shard_tensor_size, edge.lane_stage_type) == (65_536.0, setup_pb2.LANE)


def test_dlrm_2x4_data_parallel_with_embedding_all_to_all(tmp_path: Path) -> None:
    """damsim_dlrm_2x4.txt: a chain of 8 SYSTOLIC 8000 x 8000 x 16 MLPs on r_r 2 x 4
    (10 GB/s), 8 chips, num_copy 1 -> DP = 8; global batch 4096; num_config 2; no overlap;
    1040 cores of 32 x 6 at 1.6 GHz; pmu 1040 of 524,288 B; DRAM 1638 GB/s. MLP_4 has
    ALL_TO_ALL 20,480 B and memory_size 20,480 B.
      PMU rows: each weight 8000 x 8000 x 2 B = 128,000,000 B takes ceil(/524,288) = 245
        PMUs, so 5 or more MLPs (>= 1,225) never fit 1040: the split is 4 + 4 (3 + 5 and
        one configuration are infeasible). Each edge: 8000 x 16 x 2 = 256,000 B; x 2
        (depth 2 on a chain, or crossing) = 512,000 B -> 1 PMU; its lane/stage rows
        (stage x 6 / 32, lane x stage x 6 / 8000) need 1 too: 980 + 4 <= 1040.
      compute: 4 kernels, 260 cores each; cycles = ceil(250/lane) x ceil(16/(6 stage)) x
        8000: lane 84, stage 3 (252 cores) -> 3 x 1 x 8000 = 24,000; 16,000 would need
        2 x 1 (lane 125 x stage 3 = 375 cores) > 260 -> 24,000 / 1.6 GHz = 15,000 ns each
      memory (each crossing edge at both ends): config 0: MLP_4 -> MLP_5 256,000 B +
        memory_size 20,480 B = 276,480 B / 1638 GB/s = 168.79 ns; config 1: 256,000 B =
        156.29 ns
      all-to-all (config 0): 20,480 / 8 chips = 2,560 B per chip; r_r factors (2x = 4,
        8*7/2 = 28), (2y = 8, 28): 28 / (10 x 4) = 0.7 ns/B is the slower level -> 1,792 ns
      II = (15,000 + 168.79 + 1,792) + (15,000 + 156.29) = 32,117.08 ns
      step = II x global batch / DP = 32,117.08 ns x 4096 / 8 = 16.4439 ms (no pipeline:
      no bubble).
    DFModel's own dse_final.txt for this input (DAMSim/DLRM/2x4 @ d818f8b) has the same
    split: MLP_1-4 in configuration 0, MLP_5-8 in 1."""
    s, cfgs = _run("damsim_dlrm_2x4.txt", tmp_path / "df")
    compute = 24_000 / GHZ_1_6 * 1e-9
    ii = 2 * compute + (276_480 + 256_000) / 1638e9 + 1_792e-9
    assert s["latency_s"] == pytest.approx(ii * 4096 / 8, rel=1e-12)
    assert s["parallelism"]["dp"] == 8 and s["parallelism"]["tp"] == 1
    assert [c["kernels"] for c in cfgs] == ["MLP_1;MLP_2;MLP_3;MLP_4", "MLP_5;MLP_6;MLP_7;MLP_8"]
    assert [float(c["network_s"]) for c in cfgs] == pytest.approx([1_792e-9, 0.0])
    assert float(cfgs[0]["memory_s"]) == pytest.approx(276_480 / 1638e9, rel=1e-12)
    assert s["pipeline_bubble_s"] == 0.0
    # dse_final.txt as DFModel's own (DAMSim/DLRM/2x4 @ d818f8b): configurations 0 0 0 0
    # 1 1 1 1, every edge a STAGE input (a weight GEMM's first input)
    final = text_format.Parse((tmp_path / "df" / "dse_final.txt").read_text(), setup_pb2.Setup())
    assert [k.config for k in final.dataflow_graph.kernels] == [0] * 4 + [1] * 4
    assert {c.lane_stage_type for c in final.dataflow_graph.connections} == {setup_pb2.STAGE}


def test_mamba_reproduces_dfmodels_committed_log(tmp_path: Path) -> None:
    """ssm_mamba_hsscan_256k.txt, DFModel's newer schema (its commit b9a3e2f): no sram_cap
    (no limit), 1 chip of 520 cores (32 x 12, 1.6 GHz), DRAM 8192 GB/s, num_config 3,
    perfect overlap, execution.effective_stage 5, seq_len 262,144 with tile_size free.
    At that commit a kernel's num_input multiplies its configuration's II (not its
    cycles) and a configuration holding a streamed kernel runs one tile. The four
    Scan_stage kernels (num_input 32) share a configuration with no other kernel; Conv ->
    scans -> Multiply puts Proj1 and Conv in 0, the scans in 1, Multiply and Proj3 in 2
    (Proj2 in 0 or 2). The search tries every num_tile where a tiled dim's
    ceil(262,144 / num_tile) changes; the best is num_tile 20 (shard 13,108), as in
    DFModel's log.txt (SSM/Mamba/hsscan_w_hw/256K, final_ns 5350.406202316284):
      config 0 {Proj1 32x32x13108 N-tiled, Conv 13108x32x1 M-tiled}: Proj1 cycles =
        ceil(13108 / (12 stage)) x 32, Conv = ceil(13108 / (32 lane)) x 32; 3 x 32 = 96
        with stage 365 + lane 137 = 502 cores (2 x 32 = 64 needs 547 + 205 > 520):
        96 x 20 tiles / 1.6 GHz = 1,200 ns (memory: Conv's 26,216 B x 20 / 8192 = 64 ns)
      config 1 {scans, one tile}: memory = Conv's tile 13108 x 2 = 26,216 B + Scan_stage_3's
        262,144 x 2 = 524,288 B over 8192 GB/s = 67.2002 ns (compute 64 cycles = 40 ns at
        130 cores each) -> II = 67.2002 x num_input 32 = 2,150.40625 ns
      config 2 {Proj2, Multiply 13108x32 SIMD, Proj3}: ceil(13108 / (12 stage)) x 32 and
        ceil(13108 / (32 lane)) x 32: 5 x 32 = 160 with 219 + 82 + 219 = 520 cores (4 x 32
        needs 274 + 103 + 274 > 520): 160 x 20 / 1.6 GHz = 2,000 ns
      step = 1,200 + 2,150.40625 + 2,000 = 5,350.40625 ns."""
    s, cfgs = _run("ssm_mamba_hsscan_256k.txt", tmp_path / "df")
    assert s["status"] == "optimal"
    assert s["latency_s"] == pytest.approx(5350.406202316284e-9, rel=1e-12)  # DFModel's log
    compute = [96 * 20 / GHZ_1_6 * 1e-9, None, 160 * 20 / GHZ_1_6 * 1e-9]
    ii = [compute[0], (26_216 + 524_288) / 8192e9 * 32, compute[2]]
    assert [float(c["latency_s"]) for c in cfgs] == pytest.approx(ii, rel=1e-12)
    assert cfgs[1]["kernels"] == "Scan_stage_0;Scan_stage_1;Scan_stage_2;Scan_stage_3"
    # the log's statistics: System Cost 16522.25 (a float) + 8192 x 1 (DRAM) = 24714.25,
    # no link or switch on one chip; Workload FLOP counts each kernel num_input times:
    # 3 x 2*32*32*262144 + 2*262144*32*1 + 4 x 2*262144*5*1 x 32 + 262144*32
    # = 1,610,612,736 + 16,777,216 + 335,544,320 + 8,388,608 = 1,971,322,880
    assert s["system_cost"] == 24714.25
    assert s["system_power_W"] == pytest.approx(1775.7423400878906, rel=1e-12)  # the log's
    assert s["workload_flop"] == 1_971_322_880


def _brute(kernels, cores: int, widths, effective: int) -> int:
    """Every (lane, stage) per kernel with the total <= cores: the least max cycles."""
    best = math.inf
    pairs = [(lane, stage) for lane in range(1, cores + 1) for stage in range(1, cores + 1)]
    pairs = [p for p in pairs if p[0] * p[1] <= cores]
    for pick in itertools.product(pairs, repeat=len(kernels)):
        if sum(lane * stage for lane, stage in pick) > cores:
            continue
        worst = 0
        for (m, k, n, simd, num_input), (lane, stage) in zip(kernels, pick):
            mf = math.ceil(m / (lane * widths[0]))
            if simd:
                cyc = mf * n if stage == 1 else math.inf
            elif effective:
                cyc = mf * math.ceil(k / (stage * effective)) * n
            else:
                cyc = mf * math.ceil(n / (stage * widths[1])) * k
            worst = max(worst, cyc * num_input)
        best = min(best, worst)
    return best


@pytest.mark.parametrize("effective", [0, 3])
def test_lane_stage_min_max_equals_exhaustive_enumeration(effective: int) -> None:
    """The configuration's min-max over core splits equals brute force over every
    (lane, stage) of every kernel on a 12-core chip of 4 x 3 units."""
    kernels = [(37, 7, 11, False, 1), (20, 9, 5, False, 2), (50, 1, 6, True, 1)]
    widths = (4, 3)
    tables = [
        lane_kernel((m, k, n), simd, 0 if simd else effective, widths, 12, streams)
        for m, k, n, simd, streams in kernels
    ]
    got, cores = config_cycles(tables, 12)
    assert got == _brute(kernels, 12, widths, effective)
    assert sum(cores) <= 12 and max(t.cycles(c) for t, c in zip(tables, cores)) == got
