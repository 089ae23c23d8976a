"""Achievable efficiency of kernels on a chip (fraction of peak), from the chip's model.

The pure roofline is efficiency 1 everywhere; chips in the library carry measured
parameters (gemm_util, roll-off for small dimensions, wave quantisation, DRAM fraction).
"""

from __future__ import annotations

import math

from hardware.system import Chip


def gemm_efficiency(chip: Chip, m: int, n: int, k: int, batch: int = 1) -> float:
    """Fraction of matrix peak a GEMM of this (per-chip) shape reaches."""
    eff = chip.efficiency
    if eff.fixed_compute_util > 0:
        return eff.fixed_compute_util
    util = eff.gemm_util or 1.0
    if eff.gemm_half_dim > 0:
        for d in (m, n, k):
            util *= d / (d + eff.gemm_half_dim)
    if eff.gemm_tile_m > 0 and eff.gemm_tile_n > 0 and chip.cores > 0:
        tiles = math.ceil(m / eff.gemm_tile_m) * math.ceil(n / eff.gemm_tile_n) * batch
        waves = math.ceil(tiles / chip.cores)
        util *= tiles / (waves * chip.cores)
    return max(util, 1e-3)


def attention_efficiency(chip: Chip) -> float:
    eff = chip.efficiency
    if eff.fixed_compute_util > 0:
        return eff.fixed_compute_util
    return eff.attention_util or eff.gemm_util or 1.0


def vector_efficiency(chip: Chip) -> float:
    return chip.efficiency.vector_util or 1.0


def dram_efficiency(chip: Chip) -> float:
    return chip.efficiency.dram_util or 1.0
