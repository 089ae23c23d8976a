"""Achievable efficiency of kernels on a chip (fraction of peak), from the chip's model.

The pure roofline is efficiency 1 everywhere. A chip file's `efficiency` block carries
measured parameters, one set per chip (fitted in `mapshard.fidelity.fit`, each number
citing its rows), and these functions turn them into a per-shape fraction:

GEMM (per chip shard, C[m,n] += A[m,k] B[k,n], `batch` independent GEMMs):
    eff = gemm_util * k / (k + gemm_half_dim) * occupancy(m, n, batch)
  - gemm_util: the large-GEMM plateau (cuBLAS at 8-16k cubes), which folds in the clock the
    chip sustains under full tensor load; `gemm_util_by_precision` replaces it for a math
    precision whose plateau differs (FP8 on Hopper: power-bound below the 16-bit one), picked
    by `for_precision` before the solver builds its menus;
  - k / (k + gemm_half_dim): the per-tile prologue/epilogue (loading the first K slices,
    writing C) amortised over the main loop, which shortens with k;
  - occupancy: output tiles of gemm_tile_m x gemm_tile_n (the library's thread-block tile;
    a tile of half its area and the transposes are also candidates, as cuBLAS heuristics
    pick among tile shapes) spread over `cores` streaming multiprocessors in waves. A
    partial last wave and padding of m, n to whole tiles idle the machine:
    occupancy = useful MACs / (waves x cores x tile MACs), best candidate tile.
A fixed per-kernel latency (launch, pipeline fill and drain) is `kernel_overhead_s`, added
by the solver's menus per kernel, not here. A GEMM also takes at least `kernel_min_time_s`
in all (the shortest GEMM the chip's measurements show: GB200 runs 1024^3 and 1024x2145x1024
in the same 4.4 us), so its compute time is at least `busy_floor` = that floor less the
overhead (with overlap, overhead + max(compute, memory) is then max(floor, overhead +
max(compute, memory)); without, the floor bounds the compute part only). The floor is
fitted on GEMMs and charged to GEMMs only: no measurement shows it for elementwise, norm
or copy kernels, which keep overhead + their work. FP8 GEMMs that accumulate with FP32
promotion (FP8 training's dgrad and wgrad, `Kernel.split_accumulate`) run at
`fp8_split_accumulate_util` instead of the FP8 plateau (`split_accumulate_factor`).

DRAM: `dram_util` x bandwidth (STREAM copy / peak). Attention: `attention_util` x matrix
peak for the fused attention kernel (0 = gemm_util); unfused attention is batched GEMMs and
vector kernels. Vector: `vector_util` x vector peak, on the generator's nominal FLOP per
element (a fitted rate: softmax and normalisations do several times the nominal count).
"""

from __future__ import annotations

import math
from dataclasses import replace

from hardware.system import Chip


def tile_candidates(tile_m: int, tile_n: int, m: int = 0, n: int = 0) -> list[tuple[int, int]]:
    """The library tile, its two halves, and their transposes; a half with sides 4:1 apart
    only where its short side spans the GEMM's whole m or n.

    A 4:1 tile (256x64) loads 1.7x the operand bytes per MAC of the 2:1 library tile, and
    the library's heuristic picks one for a GEMM that narrow itself (small-M decode), not to
    avoid padding: the n = 192 cuBLASLt rows (A100 FP16 157.8 TF, H200 FP8 717.5 TF at
    802816 x 768 x 192) run at the 0.75 a 128-wide tile leaves, not at the 0.99 of 256x64."""
    out = []
    for tm, tn in ((tile_m, tile_n), (tile_n, tile_m)):
        for fm, fn in ((1, 1), (2, 1), (1, 2)):
            cand = (max(tm // fm, 16), max(tn // fn, 16))
            narrow = max(cand) > 2 * min(cand)
            spans = (cand[0] < cand[1] and 0 < m <= cand[0]) or (
                cand[1] < cand[0] and 0 < n <= cand[1]
            )
            if cand not in out and (not narrow or spans or (fm, fn) == (1, 1)):
                out.append(cand)
    return out


SPLIT_K_SLICE = 256  # smallest K slice a split-K GEMM hands one multiprocessor


def occupancy(
    m: int, n: int, batch: int, cores: int, tile_m: int, tile_n: int, k: int = 0
) -> float:
    """Useful fraction of the tensor units over the waves of output tiles (best tile).

    Too few output tiles to fill the machine (skinny decode GEMMs) are split along K, as
    cuBLAS's split-K kernels do, in slices of at least SPLIT_K_SLICE."""
    if cores <= 0 or tile_m <= 0 or tile_n <= 0:
        return 1.0
    best = 0.0
    for tm, tn in tile_candidates(tile_m, tile_n, m, n):
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
        splits = {1}
        if tiles < cores and k > 0:
            splits.add(max(1, min(cores // tiles, k // SPLIT_K_SLICE)))
        for split in splits:
            # each split tile does 1/split of the K loop
            waves = math.ceil(tiles * split / cores)
            best = max(best, (m * n * batch * split) / (waves * cores * tm * tn))
    return best


def k_rolloff(k: int, half: float) -> float:
    """Main-loop share of a tile's time: k / (k + half)."""
    return k / (k + half) if half > 0 and k > 0 else 1.0


# Precisions whose matrix work runs on other units than the 16-bit tensor cores the
# gemm_util plateau was fitted on (FP64 tensor cores / DMMA, FP32 CUDA cores): without a
# plateau of their own they run at their peak, flagged, never at the 16-bit plateau.
OWN_UNITS = ("fp64", "fp32")


def for_precision(chip: Chip, precision: str) -> Chip:
    """The chip with the GEMM plateau of `precision` (its own when the chip file gives one;
    1.0 of the precision's peak for OWN_UNITS, flagged by `plateau_warning`; else gemm_util).
    The chip's own gemm_util and gemm_half_dim are kept as `base_gemm_util` and
    `base_gemm_half_dim`, so `for_precision` of the result at another precision still finds
    them.

    The K roll-off k / (k + h) is a fixed time per output tile (the prologue loading the
    first K slices, the epilogue writing C) against the main loop's time per K step. OWN_UNITS
    run each K step peak(16-bit) / peak(p) times slower, so the same fixed time is worth that
    many times fewer K steps: h x peak(p) / peak(bf16) (the A100's fitted 176 is 11 for
    FP64 DGEMMs, whose K is HPL's block size)."""
    eff = chip.efficiency
    base = eff.base_gemm_util or eff.gemm_util
    base_half = eff.base_gemm_half_dim if eff.base_gemm_half_dim >= 0 else eff.gemm_half_dim
    util = dict(eff.gemm_util_by_precision).get(precision, 0.0)
    if util <= 0 and precision in OWN_UNITS and eff.fixed_compute_util <= 0:
        util = 1.0
    if util <= 0:
        util = base
    half = dict(eff.gemm_half_dim_by_precision).get(precision, -1.0)
    if half < 0:
        half = base_half
        if precision in OWN_UNITS and half > 0:
            half *= chip.peak(precision) / chip.peak("bf16")
    if util == eff.gemm_util and half == eff.gemm_half_dim:
        return chip
    own = dict(base_gemm_util=base, base_gemm_half_dim=base_half)
    return replace(chip, efficiency=replace(eff, gemm_util=util, gemm_half_dim=half, **own))


def plateau_warning(chip: Chip, precision: str) -> str:
    """A line for the report when `precision`'s GEMMs run at an uncalibrated plateau."""
    own = dict(chip.efficiency.gemm_util_by_precision).get(precision, 0.0) > 0
    if own or precision not in OWN_UNITS or chip.efficiency.fixed_compute_util > 0:
        return ""
    return (
        f"uncalibrated: {precision} GEMMs on {chip.name} run at 100% of the {precision} peak "
        f"({chip.peak(precision) / 1e12:.1f} TFLOP/s); the chip file has no {precision} "
        "plateau (efficiency.gemm_util_by_precision)"
    )


def gemm_efficiency(chip: Chip, m: int, n: int, k: int, batch: int = 1) -> float:
    """Fraction of matrix peak a GEMM of this (per-chip) shape reaches."""
    eff = chip.efficiency
    if eff.fixed_compute_util > 0:
        return eff.fixed_compute_util
    util = (eff.gemm_util or 1.0) * k_rolloff(k, eff.gemm_half_dim)
    if eff.gemm_tile_m > 0 and eff.gemm_tile_n > 0:
        util *= occupancy(m, n, max(batch, 1), chip.cores, eff.gemm_tile_m, eff.gemm_tile_n, k)
    return max(util, 1e-3)


def busy_floor(chip: Chip) -> float:
    """Shortest compute time of one GEMM (s): the GEMM floor less the per-kernel overhead
    the caller adds."""
    eff = chip.efficiency
    return max(eff.kernel_min_time_s - eff.kernel_overhead_s, 0.0)


def gemm_compute_time(
    chip: Chip, flop: float, peak_flops: float, m: int, n: int, k: int, batch: int = 1
) -> float:
    """Compute time of one GEMM kernel at `peak_flops` (its precision's peak): the work at
    `gemm_efficiency`, never below `busy_floor`."""
    return max(flop / (peak_flops * gemm_efficiency(chip, m, n, k, batch)), busy_floor(chip))


def split_accumulate_factor(chip: Chip) -> float:
    """Rate of an FP8 GEMM with split (FP32-promoted) accumulation relative to the FP8
    plateau, on a chip already at its FP8 plateau (`for_precision(chip, "fp8")`): the
    chip's fp8_split_accumulate_util / that plateau; 1 when the chip gives none (no
    fast-accumulation mode to lose, e.g. Blackwell) or pins a fixed compute_util."""
    eff = chip.efficiency
    if eff.fp8_split_accumulate_util <= 0 or eff.fixed_compute_util > 0 or eff.gemm_util <= 0:
        return 1.0
    return min(1.0, eff.fp8_split_accumulate_util / eff.gemm_util)


def attention_efficiency(chip: Chip) -> float:
    """Fraction of matrix peak the fused attention kernel reaches."""
    eff = chip.efficiency
    if eff.fixed_compute_util > 0:
        return eff.fixed_compute_util
    return eff.attention_util or eff.gemm_util or 1.0


def vector_efficiency(chip: Chip) -> float:
    return chip.efficiency.vector_util or 1.0


def dram_efficiency(chip: Chip) -> float:
    return chip.efficiency.dram_util or 1.0


def achieved_dram_Bps(chip: Chip, peak_Bps: float) -> float:
    """The DRAM bandwidth any streaming, memory-bound kernel reaches: the peak times the
    chip's measured copy fraction (dram_util). Written once because the graphs' kernels,
    the optimizer step, the FP8 weight cast and the context-parallel merge all stream
    through the same DRAM; none of them reaches the raw peak."""
    return peak_Bps * dram_efficiency(chip)
