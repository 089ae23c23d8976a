"""Fitting a chip's efficiency parameters to measurements, reproducibly.

The chip files' `efficiency` blocks cite the numbers this module computes from the
validation cases (tests/test_efficiency_fit.py checks they agree), so every fitted value
can be re-derived:
- dram_util: STREAM/BabelStream copy bandwidth / DRAM peak (memory_copy rows);
- gemm_util, gemm_half_dim, kernel_overhead_us: least mean |relative error| of the GEMM
  model (`solver.efficiency`) against every compute-bound GEMM point of the chip: the gemm
  rows and the same source's companion sizes in extra_params (also_<n>cube_flops,
  also_down_proj_s); memory-bound points (time below 1.5x their DRAM time) are left out;
- collective bus_bw_util and half_bw_bytes per scale-up level: nccl-tests bus bandwidth at
  the largest size / link bandwidth (capped at 1: NVLS in-switch reduction exceeds the ring
  bound, see the chip files), and the half size from the 64 MiB point, where the solver's
  `effective_bandwidth` sees the per-chip chunk message_bytes / p.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from hardware.system import Chip, Efficiency
from mapshard.fidelity.cases import Case
from solver.efficiency import gemm_efficiency

HALF_DIMS = tuple(range(0, 1025, 16))
OVERHEADS_US = tuple(x / 2 for x in range(0, 21))  # launch + fill/drain: 0-10 us
UTILS = tuple(u / 1000 for u in range(400, 1001, 2))


@dataclass(frozen=True)
class GemmPoint:
    """One measured GEMM: shape, precision, time, and where it comes from."""

    source: str  # row id (+ companion key)
    m: int
    n: int
    k: int
    precision: str
    time_s: float

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k


def gemm_points(cases: list[Case], chip: str) -> list[GemmPoint]:
    """Every GEMM measurement of `chip`: rows plus their companion sizes."""
    out = []
    for c in cases:
        if c.kind != "gemm" or not c.usable or c.text("chip") != chip:
            continue
        m, k, n, prec = c.int("m"), c.int("k"), c.int("n"), c.text("precision")
        value = c.measured or 0.0
        t = value if c.metric == "kernel_time_s" else 2.0 * m * n * k / value
        out.append(GemmPoint(c.id, m, n, k, prec, t))
        for key, raw in sorted(c.extra.items()):
            cube = re.fullmatch(r"also_(\d+)cube_flops", key)
            if cube:
                d = int(cube.group(1))
                out.append(GemmPoint(f"{c.id}:{key}", d, d, d, prec, 2.0 * d**3 / float(raw)))
            elif key == "also_down_proj_s":  # vidur mlp.csv: down_proj is (m, k=n/2) x (n/2, k)
                out.append(GemmPoint(f"{c.id}:{key}", m, k, n // 2, prec, float(raw)))
    return out


def model_time(chip: Chip, p: GemmPoint, overhead_s: float) -> float:
    """Compute-side time of a GEMM point under the chip's efficiency model."""
    return overhead_s + p.flop / (chip.peak(p.precision) * gemm_efficiency(chip, p.m, p.n, p.k))


def memory_time(p: GemmPoint, dram_Bps: float) -> float:
    """Compulsory DRAM time of a point: A, B read and C written once (FP8 GEMMs take 1-byte
    inputs and write a 16-bit C, as cuBLASLt's FP8 GEMMs do)."""
    a = 1.0 if p.precision == "fp8" else 4.0 if p.precision in ("fp32", "tf32") else 2.0
    c = max(a, 2.0)
    return ((p.m * p.k + p.k * p.n) * a + p.m * p.n * c) / dram_Bps


def compute_bound(points: list[GemmPoint], dram_Bps: float) -> list[GemmPoint]:
    """Points whose measured time is well above their compulsory DRAM time."""
    return [p for p in points if p.time_s > 1.5 * memory_time(p, dram_Bps)]


@dataclass(frozen=True)
class GemmFit:
    gemm_util: float
    gemm_half_dim: float
    kernel_overhead_us: float
    mean_abs_err: float
    max_abs_err: float
    points: tuple[GemmPoint, ...]


def fit_gemm(
    chip: Chip,
    points: list[GemmPoint],
    fix_overhead_us: float | None = None,
    fix_half_dim: float | None = None,
) -> GemmFit:
    """Grid search of (gemm_util, gemm_half_dim, kernel_overhead_us) minimising the mean
    absolute relative time error over `points` (the chip's tile sizes are kept). With fewer
    than three points only gemm_util is determined: pass the other two (taken from a chip
    of the same SM architecture)."""
    assert points, "no GEMM points to fit"
    import numpy as np

    overheads = OVERHEADS_US if fix_overhead_us is None else (fix_overhead_us,)
    utils = np.array(UTILS)
    times = np.array([p.time_s for p in points])
    best: tuple[float, float, float, float, float] | None = None
    halves = HALF_DIMS if fix_half_dim is None else (fix_half_dim,)
    for half in halves:
        base = replace(
            chip, efficiency=replace(chip.efficiency, gemm_util=1.0, gemm_half_dim=float(half))
        )
        raw = np.array([model_time(base, p, 0.0) for p in points])
        for ovh in overheads:
            errs = np.abs((ovh * 1e-6 + raw[None, :] / utils[:, None]) / times[None, :] - 1)
            means = errs.mean(axis=1)
            i = int(np.argmin(means))
            if best is None or means[i] < best[0] - 1e-12:
                best = (float(means[i]), float(utils[i]), float(half), ovh, float(errs[i].max()))
    assert best is not None
    mean, u, half, ovh, worst = best
    return GemmFit(u, half, ovh, mean, worst, tuple(points))


def fit_dram_util(cases: list[Case], chip: str, dram_Bps: float) -> tuple[float, list[str]]:
    """Mean measured copy bandwidth / peak over the chip's memory_copy rows."""
    rows = [
        c
        for c in cases
        if c.kind == "memory_copy" and c.usable and c.text("chip") == chip and c.measured
    ]
    if not rows:
        return 0.0, []
    return sum(c.measured / dram_Bps for c in rows) / len(rows), [c.id for c in rows]


@dataclass(frozen=True)
class CollectiveFit:
    bus_bw_util: float
    half_bw_bytes: float
    uncapped_util: float
    sources: tuple[str, ...]


def _busbw(c: Case) -> float:
    """Bus bandwidth of a collective row (time rows converted with the nccl-tests rule)."""
    if c.metric == "bus_bandwidth_Bps":
        return c.measured or 0.0
    n = c.int("num_chips")
    t = c.measured or math.inf
    return c.float("message_bytes") / t * 2 * (n - 1) / n


def _busbw_64mib(c: Case) -> float:
    if "also_busbw_64MiB_Bps" in c.extra:
        return c.extra_float("also_busbw_64MiB_Bps")
    if "also_time_64MiB_s" in c.extra:
        n = c.int("num_chips")
        return 2**26 / c.extra_float("also_time_64MiB_s") * 2 * (n - 1) / n
    return 0.0


def fit_collective(cases: list[Case], chip: str, link_Bps: float) -> CollectiveFit | None:
    """Scale-up all-reduce efficiency from the chip's largest-size and 64 MiB points."""
    rows = [
        c
        for c in cases
        if c.kind == "collective"
        and c.usable
        and c.text("chip") == chip
        and c.text("collective") == "all_reduce"
        and c.int("num_chips") <= (c.int("chips_per_node") or c.int("num_chips"))
    ]
    large = [c for c in rows if c.float("message_bytes") >= 2**30]
    if not large:
        return None
    raw = sum(_busbw(c) for c in large) / len(large) / link_Bps
    util = min(raw, 1.0)
    halves = []
    for c in rows:
        b64 = _busbw_64mib(c) if c.float("message_bytes") != 2**26 else _busbw(c)
        if b64 > 0:
            chunk = 2**26 / c.int("num_chips")  # effective_bandwidth sees size / p
            halves.append(chunk * max(util * link_Bps / b64 - 1, 0.0))
    half = sum(halves) / len(halves) if halves else 0.0
    return CollectiveFit(
        round(util, 3), float(f"{half:.3g}"), raw, tuple(sorted({c.id for c in rows}))
    )


def chip_with(chip: Chip, efficiency: Efficiency) -> Chip:
    return replace(chip, efficiency=efficiency)
