"""The causal-attention tile model's two numbers per pass and kernel family (a chip file's
efficiency.causal_attention entries; solver.cost.causal_attention), fitted to the FIT rows that
time one fused causal attention kernel on a Hopper GPU.

Rows taken: `attention_fwd` rows of a self-attention (seq_len, no KV cache) with causal=1,
on an H100 or H200 (same GH100 SMs, clocks and 16-bit peak: one fit for both), one fit per
kernel family, as the row's setup names it (extra_params `attention_kernel`, the setup's
execution.attention_kernel): "cudnn" when unset (cuDNN, FlashAttention-3: Hopper's
warpgroup kernels), "fa2" (FlashAttention-2, PyTorch's flash backend: Ampere-style MMA, no
warpgroup pipelining, a different kernel the other's numbers must not stand for).

Each row's time is its published rate over the flash-attention benchmark's FLOP count
(mapshard.fidelity.flops); the model's is the closed form the menus price a compute-bound
kernel by: the tile model plus the chip's per-kernel overhead, once for the forward, twice
(its two kernels) for the backward. The fit is the least mean |relative error| on a grid.

The decode kernel without a KV split (efficiency.unsplit_decode_attention:
solver.cost.unsplit_decode) is fitted the same way, on the FIT rows that time one such kernel
(`attention_fwd` rows with a `kv_len` and `decode_attention=kv_shared_unsplit`, H100 or
H200): one SM's streaming bandwidth and the fixed time per wave of blocks, the model's time
the menus' for that kernel (the streaming time, or the cache at the chip's achievable DRAM
bandwidth where that is longer, plus the per-kernel overhead).

    python -m mapshard.fidelity.fit_attention
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.ops_attention import BWD_FLOP_SHARE
from hardware.system import ATTENTION_KERNELS, Chip
from mapshard.fidelity import flops
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.fit import library_system
from solver.api import (
    BWD_EXPS_PER_SCORE,
    FWD_EXPS_PER_SCORE,
    CausalAttentionShape,
    achieved_dram_Bps,
    causal_attention_seconds,
    exp_rate,
    unsplit_block_bytes,
    unsplit_decode_seconds,
)

HOPPER = ("H100-SXM5-80GB", "H200-SXM-141GB")
DEFAULT_KERNEL = "cudnn"  # the first causal_attention entry of the GH100 chip files
UTIL_GRID = tuple(round(0.20 + 0.005 * i, 3) for i in range(161))  # 0.20 .. 1.00
WAVE_GRID_US = tuple(0.25 * i for i in range(241))  # 0 .. 60 us


@dataclass(frozen=True)
class AttentionPoint:
    row: str
    chip: str
    backward: bool
    batch: int
    heads: int
    head_dim: int
    seq_len: int
    measured_s: float
    window: int = 0  # a sliding window in tokens (0 = none): benchmarks/attention_tables.py


@dataclass(frozen=True)
class AttentionFit:
    util: float
    wave_us: float
    mean_abs_err: float
    max_abs_err: float
    rows: tuple[str, ...]


def attention_points(cases: Sequence[Case], kernel: str, pass_: str) -> list[AttentionPoint]:
    """The FIT rows the fit takes for one kernel family and pass ("fwd" or "bwd"), in file
    order."""
    points = []
    for c in cases:
        if c.kind != "attention_fwd" or not c.usable or c.text("chip") not in HOPPER:
            continue
        if c.int("seq_len") <= 0 or c.extra.get("causal") != "1":
            continue
        if (c.extra.get("attention_kernel") or DEFAULT_KERNEL) != kernel:
            continue
        if flops.attention_pass(c) != pass_ or c.metric != "throughput_flops":
            continue
        points.append(
            AttentionPoint(
                c.id,
                c.text("chip"),
                pass_ == "bwd",
                c.int("batch", 1),
                c.int("heads"),
                c.int("head_dim"),
                c.int("seq_len"),
                flops.flash_attention(c) / float(c.text("value")),
            )
        )
    return points


@functools.cache
def _chip(name: str) -> Chip:
    return library_system(name).chip


@functools.cache
def _dram_Bps(name: str) -> float:
    system = library_system(name)
    return achieved_dram_Bps(system.chip, system.dram.bandwidth_Bps)


def model_seconds(p: AttentionPoint, util: float, wave_s: float) -> float:
    """The point's time as the menus price it when compute binds (per-kernel overhead
    included; the backward is two kernels of BWD_FLOP_SHARE x the forward FLOP each, and
    half the recomputed exponentials each)."""
    chip = _chip(p.chip)
    overhead_s = chip.efficiency.kernel_overhead_s
    flop = 4.0 * p.batch * p.seq_len * p.seq_len * p.heads * p.head_dim
    shape = CausalAttentionShape(p.batch * p.heads, p.seq_len, p.seq_len, p.window)
    kernels, share = (2, BWD_FLOP_SHARE) if p.backward else (1, 1.0)
    exps = BWD_EXPS_PER_SCORE if p.backward else FWD_EXPS_PER_SCORE
    peak = chip.peak("bf16")
    one = causal_attention_seconds(
        shape, flop * share, peak, util, wave_s, chip.cores, exp_rate(chip), exps
    )
    return kernels * (one + overhead_s)


def fit_attention(
    points: Sequence[AttentionPoint],
    utils: Sequence[float] = UTIL_GRID,
    waves_us: Sequence[float] = WAVE_GRID_US,
) -> AttentionFit:
    """(util, wave time) of least mean |relative error| over `points`."""
    return _least_error(points, model_seconds, utils, waves_us)


def _least_error(
    points: Sequence[AttentionPoint] | Sequence[DecodePoint],
    model: Callable[[Any, float, float], float],
    firsts: Sequence[float],
    waves_us: Sequence[float],
) -> AttentionFit:
    """The grid point (first number, wave time) of least mean |relative error| of
    `model(point, first, wave_s)` over `points` (ties: the first on the grid, so the result
    depends on nothing but the rows)."""
    best: tuple[float, float, float, float] | None = None
    for first in firsts:
        for wave_us in waves_us:
            errs = [abs(model(p, first, wave_us * 1e-6) / p.measured_s - 1) for p in points]
            mean = sum(errs) / len(errs)
            if best is None or mean < best[2] - 1e-12:
                best = (first, wave_us, mean, max(errs))
    assert best is not None, "no rows to fit"
    return AttentionFit(best[0], best[1], best[2], best[3], tuple(p.row for p in points))


UNSPLIT = "kv_shared_unsplit"
SM_STREAM_GRID_GBPS = tuple(float(v) for v in range(10, 201))  # 10 .. 200 GB/s
DECODE_WAVE_GRID_US = tuple(0.1 * i for i in range(101))  # 0 .. 10 us


@dataclass(frozen=True)
class DecodePoint:
    row: str
    chip: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    kv_len: int
    measured_s: float


def decode_points(cases: Sequence[Case]) -> list[DecodePoint]:
    """The FIT rows timing one decode attention kernel without a KV split, in file order."""
    points = []
    for c in cases:
        if c.kind != "attention_fwd" or not c.usable or c.text("chip") not in HOPPER:
            continue
        if c.int("kv_len") <= 0 or c.extra.get("decode_attention") != UNSPLIT:
            continue
        if c.metric != "kernel_time_s":
            continue
        heads = c.int("heads")
        points.append(
            DecodePoint(
                c.id,
                c.text("chip"),
                c.int("batch", 1),
                heads,
                c.int("kv_heads", heads),
                c.int("head_dim"),
                c.int("kv_len"),
                float(c.text("value")),
            )
        )
    return points


def decode_model_seconds(p: DecodePoint, sm_stream_GBps: float, wave_s: float) -> float:
    """The point's time as the menus price it: the blocks' streaming time or the 16-bit
    cache at the achievable DRAM bandwidth, the longer, plus the per-kernel overhead."""
    chip = _chip(p.chip)
    per_block = unsplit_block_bytes(p.kv_len, p.head_dim, 2.0)
    blocks = p.batch * p.kv_heads
    stream = unsplit_decode_seconds(blocks, per_block, chip.cores, sm_stream_GBps * 1e9, wave_s)
    dram = blocks * per_block / _dram_Bps(p.chip)
    return max(stream, dram) + chip.efficiency.kernel_overhead_s


def fit_unsplit_decode(
    points: Sequence[DecodePoint],
    sm_stream_GBps: Sequence[float] = SM_STREAM_GRID_GBPS,
    waves_us: Sequence[float] = DECODE_WAVE_GRID_US,
) -> AttentionFit:
    """(SM streaming GB/s, wave time) of least mean |relative error| over `points`."""
    return _least_error(points, decode_model_seconds, sm_stream_GBps, waves_us)


FIT_PATHS = (
    Path("tests/data/validation/validation_dev_structured.csv"),
    Path("tests/data/validation/validation_public_fit.csv"),
)

if __name__ == "__main__":  # pragma: no cover - the fit's command line
    fit_cases = [c for path in FIT_PATHS for c in read_cases(path)]
    decode = fit_unsplit_decode(decode_points(fit_cases))
    print(
        f"unsplit decode: sm_stream_GBps {decode.util}, wave_us {decode.wave_us:.1f} (mean "
        f"|err| {100 * decode.mean_abs_err:.2f}%, max {100 * decode.max_abs_err:.2f}%) over "
        f"{', '.join(decode.rows)}"
    )
    for family in ATTENTION_KERNELS:
        for name in ("fwd", "bwd"):
            result = fit_attention(attention_points(fit_cases, family, name))
            print(
                f"{family}: {name}_util {result.util}, {name}_wave_us {result.wave_us} "
                f"(mean |err| {100 * result.mean_abs_err:.2f}%, max "
                f"{100 * result.max_abs_err:.2f}%) over {', '.join(result.rows)}"
            )
