"""Kernel times read from NVIDIA's measured tables (hardware.kernel_db) for the classes a
chip reads them for (`Chip.kernel_tables`, hardware.kernel_source): GEMMs and group-aware
decode attention. solver.cost.kernel_times decides when they apply and falls back to the
physical model; this module only reads and interpolates the tables.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hardware import kernel_db
from hardware.kernel_source import DECODE_ATTENTION_TABLE, GEMM_16BIT_TABLE, GEMM_TABLE
from hardware.system import Chip

# MapShard precision -> the table's gemm_dtype
TABLE_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
SIXTEEN_BIT = ("bf16", "fp16")  # the precisions GEMM_16BIT_TABLE reads


@dataclass(frozen=True)
class KernelTime:
    """Seconds and where they come from (kernels.csv `time_source`)."""

    seconds: float
    source: str
    # the part of `seconds` that is the launch-rate floor's excess over the work
    # (efficiency.busy_floor): reported as overhead, not compute (mapshard report tables)
    floor_s: float = 0.0


def table_of(chip: Chip, kind: str = GEMM_TABLE) -> tuple[str, str, str] | None:
    """(system, framework, version) of the chip's tables for kernel class `kind`, None when
    that class does not read them."""
    if not chip.kernel_source or not chip.kernel_system or kind not in chip.kernel_tables:
        return None
    framework, _, version = chip.kernel_source.partition("-")
    return chip.kernel_system, framework, version


@functools.cache
def _label(ref: tuple[str, str, str]) -> str:
    """The version said in a source: "trtllm-1.3.0rc20", or "trtllm-1.3.0rc23 (1.3.0rc20
    data)" for a version whose table reuses another's."""
    system, framework, version = ref
    data = kernel_db.data_version(system, "gemm", framework, version, "gemm_perf")
    return f"{framework}-{version}" + (f" ({data} data)" if data and data != version else "")


def gemm_table_of(
    chip: Chip, precision: str, m: int = 0, n: int = 0
) -> tuple[str, str, str] | None:
    """`table_of` for a GEMM at `precision` of (per-chip) output m x n: every GEMM under
    GEMM_TABLE; under GEMM_16BIT_TABLE a BF16/FP16 one whose output tiles (the chip's
    library tile) are fewer than its cores, short of one wave (m = 0: any 16-bit GEMM)."""
    ref = table_of(chip, GEMM_TABLE)
    if ref is not None or precision not in SIXTEEN_BIT:
        return ref
    ref = table_of(chip, GEMM_16BIT_TABLE)
    e = chip.efficiency
    if ref is None or m <= 0 or e.gemm_tile_m <= 0 or e.gemm_tile_n <= 0:
        return ref
    tiles = -(-m // e.gemm_tile_m) * -(-n // e.gemm_tile_n)
    return ref if tiles < chip.cores else None


def measured_gemm_time(chip: Chip, m: int, n: int, k: int, precision: str) -> KernelTime | None:
    """A GEMM's whole kernel time from the chip's measured table (the FP8 quantize taken
    out), or None when no table covers it."""
    ref = gemm_table_of(chip, precision, m, n)
    dtype = TABLE_DTYPES.get(precision)
    if ref is None or dtype is None:
        return None
    grid = kernel_db.gemm_grid(*ref, dtype)
    if grid is None:
        return None
    hit = kernel_db.lookup(grid, m, n, k)
    if hit is None:
        return None
    seconds, how = hit
    what = f"gemm {precision}"
    if dtype == "fp8":
        quant = kernel_db.quantize_grid(*ref)
        q = kernel_db.lookup(quant, m, 0, k) if quant is not None else None
        if q is None:
            return None
        # the quantize never takes the whole row (a noisy small-m pair): keep half of it
        seconds = max(seconds - q[0], 0.5 * seconds)
        what += " less its quantize"
    return KernelTime(seconds, f"measured:{_label(ref)} {what}, {how}")


@dataclass(frozen=True)
class DecodeAttentionShape:
    """A decode attention kernel's per-chip extents: one query token per sequence against
    a cache of kv_tokens, kv_bytes per cached element."""

    sequences: int
    heads: int
    kv_heads: int
    head_dim: int
    kv_tokens: int
    kv_bytes: float


def measured_decode_attention_time(chip: Chip, shape: DecodeAttentionShape) -> KernelTime | None:
    """A group-aware decode attention kernel's whole time from the chip's measured
    generation-attention table (TensorRT-LLM's XQA kernels), interpolated over sequences and
    KV tokens; None when no table covers the head layout or cache type."""
    ref = table_of(chip, DECODE_ATTENTION_TABLE)
    kv_dtype = {2.0: "bfloat16", 1.0: "fp8"}.get(float(shape.kv_bytes))
    if ref is None or kv_dtype is None:
        return None
    grid = kernel_db.generation_attention_grid(
        *ref, shape.heads, shape.kv_heads, shape.head_dim, kv_dtype
    )
    if grid is None:
        return None
    hit = kernel_db.lookup(grid, shape.sequences, 0, shape.kv_tokens)
    if hit is None:
        return None
    seconds, how = hit
    framework, version = ref[1], ref[2]
    return KernelTime(
        seconds, f"measured:{framework}-{version} generation attention {kv_dtype} KV, {how}"
    )


@functools.cache
def _table_rate(ref: tuple[str, str, str], precision: str, overhead_s: float) -> float:
    """The highest FLOP/s any grid point of the table reaches once the per-kernel overhead
    is taken out (points shorter than twice the overhead left out): the rate the compute
    part of a measured GEMM is held under, so the search's roofline bound stays valid."""
    grid = kernel_db.gemm_grid(*ref, TABLE_DTYPES[precision])
    quant = kernel_db.quantize_grid(*ref) if precision == "fp8" else None
    best = 0.0
    for (n, k), curve in grid.curves.items():
        for m, t in zip(curve.m, curve.seconds):
            if quant is not None:
                q = kernel_db.lookup(quant, m, 0, k)
                t = max(t - q[0], 0.5 * t) if q is not None else t
            if t >= 2 * overhead_s and t > 0:
                best = max(best, 2.0 * m * n * k / (t - overhead_s))
    return best


def table_rate(chip: Chip, precision: str) -> float:
    """`_table_rate` of the chip's table at `precision`, 0 when none covers it."""
    ref = gemm_table_of(chip, precision)
    if ref is None or precision not in TABLE_DTYPES:
        return 0.0
    if kernel_db.gemm_grid(*ref, TABLE_DTYPES[precision]) is None:
        return 0.0
    if precision == "fp8" and kernel_db.quantize_grid(*ref) is None:
        return 0.0
    return _table_rate(ref, precision, chip.efficiency.kernel_overhead_s)


def floor_rate(chip: Chip, precision: str) -> float:
    """FLOP/s a table-priced GEMM's compute part is held under: the table's best point
    (`table_rate`); where a calibrated chip reads its 16-bit GEMMs by default
    (GEMM_16BIT_TABLE), also its fitted plateau, so that a table never runs a GEMM faster
    than the rate the chip's FIT rows measured and the search's roofline bound, taken at
    that plateau, stays below every plan."""
    rate = table_rate(chip, precision)
    tables = chip.kernel_tables
    if GEMM_16BIT_TABLE in tables and GEMM_TABLE not in tables and chip.calibration.calibrated:
        plateau = chip.peak(precision) * (chip.efficiency.gemm_util or 1.0)
        rate = min(rate, plateau) if rate > 0 else plateau
    return rate
