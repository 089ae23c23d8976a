"""HPL end to end: a small run's step time by hand (generator/hpl.py's look-ahead on a
P x Q grid), and DFModel's HPL inputs in both models (issue #37: the native model prices
the panel broadcast along a process row and the row swap down a column of DFModel's grid,
not over every chip)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapshard.cli import main

# 4 chips of 10 TFLOP/s (FP64 matrix and vector alike), DRAM 1000 GB/s, SRAM large enough
# for every GEMM to reach its compulsory traffic, one switch of 100 GB/s per chip, 1 us per
# step; no execution block: compute, memory and network overlap (each kernel takes the
# longest of the three), no per-kernel overhead
SMALL = """
workload { hpl { N: 4096 B: 512 X: 2 Y: 2 } }
system {
  num_chip: 4
  accelerator { fp64_tflops: 10 vector_tflops: 10 sram_cap: 1e9 }
  memory { dram_bw: 1000 dram_cap: 1e12 }
  topology { kind: SWITCH degree: 4 link_bw_GBps: 100 latency_us: 1 }
}
"""
PEAK, DRAM, LINK, ALPHA, W = 10e12, 1e12, 100e9, 1e-6, 8


def _run(tmp_path: Path, text: str, *flags: str) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "setup.txt").write_text(text)
    assert main(["run", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet", *flags]) == 0
    return json.loads((tmp_path / "out" / "summary.json").read_text())


def _panel_flop(m: int, nb: int) -> float:
    """sum over the nb columns t of (m - 1 - t)(2 nb - 1 - 2 t), in closed form."""
    a, b, n = m - 1, 2 * nb - 1, nb
    return n * a * b - (2 * a + b) * n * (n - 1) / 2 + 2 * (n - 1) * n * (2 * n - 1) / 6


def _critical_path(m: int, nb: int) -> float:
    """One process of the panel's column (P = 2): factor its m/2 x nb part (FLOP / 2 at the
    vector rate, the part read and written), broadcast it to the other process of its row
    (half the bytes cross, one step), and nb pivots: the column read, then an all-reduce
    of 4 + 2 nb doubles between the 2 processes (2 x half the bytes, 2 steps)."""
    part = m // 2 * nb * W
    factor = max(_panel_flop(m, nb) / 2 / PEAK, 2 * part / DRAM)
    bcast = max(m // 2 * nb / PEAK, 2 * part / DRAM, part / 2 / LINK + ALPHA)
    msg = (4 + 2 * nb) * W
    pivot = max(m // 2 / PEAK, (m // 2 + 1) * W / DRAM, msg / LINK + 2 * ALPHA)
    return factor + bcast + nb * pivot


def _update(n2: int, nb: int) -> float:
    """A process's update stream (P = Q = 2): all-gather of the nb x n2/2 U rows down its
    column (half crosses, one step), trsm nb (nb-1) n2/2 FLOP, DGEMM 2 (n2/2) nb (n2/2)
    FLOP, each at least its compulsory DRAM traffic."""
    c = n2 // 2
    swap = max(nb * c / PEAK, 2 * nb * c * W / DRAM, nb * c * W / 2 / LINK + ALPHA)
    trsm = max(nb * (nb - 1) * c / PEAK, (nb * nb + 2 * nb * c) * W / DRAM)
    gemm = max(2 * c * nb * c / PEAK, (2 * c * nb + 2 * c * c) * W / DRAM)
    return swap + trsm + gemm


def test_small_hpl_step_time_by_hand(tmp_path: Path) -> None:
    """N = 4096, NB = 512: 8 iterations, m_i = 4096 - 512 i. The first panel runs alone;
    beside the update of iteration i (0..6) runs the critical path of iteration i + 1
    (look-ahead depth 1): max of the two; the last iteration has no update. The solves:
    two sweeps over the 4096 x 4096 matrix split over the 4 chips by rows (1024 rows, the
    4096-vector and the 1024 results: (1024 x 4096 + 4096 + 1024) x 8 bytes each), memory
    bound; the second's all-gather of the first's result (3/4 x 32 KiB, one step) hides under
    it. The pivots dominate every step here: 512 latency-bound exchanges per panel."""
    s = _run(tmp_path, SMALL)
    nb, ms = 512, [4096 - 512 * i for i in range(8)]
    lu = _critical_path(ms[0], nb)
    lu += sum(max(_update(ms[i] - nb, nb), _critical_path(ms[i + 1], nb)) for i in range(7))
    solve = 2 * (1024 * 4096 + 4096 + 1024) * W / DRAM
    assert s["latency_s"] == pytest.approx(lu + solve, rel=1e-9)
    n = 4096
    assert s["workload_flop"] == pytest.approx(2 / 3 * n**3 - n**2 / 2 - n / 6 + 2 * n**2)
    # the per-step table adds up to the step: the hidden critical path contributes nothing
    assert sum(s["time_breakdown"].values()) == pytest.approx(s["latency_s"], rel=1e-12)


def _selene(n: int = 262144, b: int = 4096) -> str:
    """DFModel's HPL/Compare_w_existing/GPU/Selene input (fengqian-ayce/DFModel @ 04f93d5,
    user_input/setup.txt), written out: 64 SYSTOLIC iterations M = K = m, N = 4096, each
    broadcasting and swapping its whole m x 4096 x 8-byte panel; 8100 A100-like chips
    (3456 FP64 lanes at 1.41 GHz = 9.746 TFLOP/s, compute_util 0.9) on sw_sw 90 x 90 at
    25 GB/s, perfect overlap, kernel by kernel (its execution block under `execution`)."""
    kernels, edges = [], []
    for i in range(n // b):
        m, s = n - i * b, float((n - i * b) * b * W)
        kernels.append(
            f'kernels {{ name: "Iteration_{i + 1}" id: {i + 1} type: SYSTOLIC '
            f"gemm_input1_input2 {{ outer: 1 M: {m} K: {m} N: {b} input_tensor_1_size: {s} "
            f"output_tensor_size: {s} communication_type: BROADCAST communication_size: {s} "
            "tiling: NO_TILING communication_type_2: POINT_TO_POINT "
            f"communication_size_2: {s} }} }}"
        )
        if i:
            edges.append(f"connections {{ startIdx: {i} endIdx: {i + 1} id: {i} }}")
    return (
        "dataflow_graph {\n" + "\n".join(kernels + edges) + "\n}\n"
        "system { num_chip: 8100 accelerator { core: 3456 systolic_width: 1 "
        "systolic_height: 1 sram_cap: 230686720.0 freq: 1.41 } "
        "sw_sw { x: 90 y: 90 link_bw_x: 25 link_bw_y: 25 } "
        "memory { dram_bw: 1555.0 dram_cap: 42949672960 } }\n"
        "execution { hpl { n: 262144 b: 4096 num_copy: 1 } execution_style: KERNEL_BY_KERNEL "
        "perfect_overlap: true compute_util: 0.9 word: 8 }\n"
    )


def test_dfmodel_selene_hpl_in_both_models(tmp_path: Path) -> None:
    """DFModel's equations reproduce its committed log (HPL/Compare_w_existing/GPU/Selene/
    log.txt @ 04f93d5: Best objective 1.825358898633e+08 ns). The native model, by hand on
    DFModel's 90 x 90 grid: iteration i (m = 262144 - 4096 i) computes 2 m^2 4096 FLOP over
    8100 chips at 0.9 x 9.746 TFLOP/s, and a process broadcasts its 1/90 of the panel
    (m x 4096 x 8 / 90 bytes) along its row of 90 (89/90 of it at 25 GB/s) and swaps that
    share down its column (once at 25 GB/s): per iteration the longer of compute and the two
    collectives, 0.21-0.24 s in all. Before, the whole 8.59 GB panel went over all 8100
    chips per iteration (22.3 s)."""
    df = _run(tmp_path / "df", _selene(), "--cost-model", "dfmodel")
    assert df["latency_s"] == pytest.approx(1.825358898633e8 * 1e-9, rel=1e-9)
    native = _run(tmp_path / "native", _selene())
    peak = 3456 * 2 * 1.41e9 * 0.9
    hand = 0.0
    for i in range(64):
        m = 262144 - 4096 * i
        share = m * 4096 * W / 90
        hand += max(2 * m * m * 4096 / 8100 / peak, 89 / 90 * share / 25e9 + share / 25e9)
    assert 0.2 < hand < 0.25
    assert hand / 2 < native["latency_s"] < 2 * hand
