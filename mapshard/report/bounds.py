"""Data-movement bounds of GEMMs: least DRAM traffic and attainable operational intensity
as a function of the on-chip buffer (solver.cost.frontier's exact frontier), as CSV and a plot.

Shows how far a kernel is from compute-bound and what a bigger buffer would buy; the
terminal summary (`bounds_summary`) gives each GEMM's least traffic at the chip's SRAM, its
intensity against the chip's ridge point and which resource binds its roofline time.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from generator.graph import Kernel, OperandRole, Workload
from hardware.system import System
from mapshard.fmt import fmt_bytes, fmt_si, fmt_time, num
from mapshard.report.plots import frontier_svg
from solver import api as solver_api
from solver.plan import KernelPlan

BOUNDS_COLUMNS = (
    "kernel",
    "M",
    "K",
    "N",
    "bytes_per_element",
    "buffer_bytes",
    "dram_bytes",
    "operational_intensity",
    "family",
    "tile_m",
    "tile_n",
    "fits_buffer",
)


def workload_gemms(
    workload: Workload, kernel: str | None = None
) -> list[tuple[str, int, int, int, float]]:
    """(phase/kernel, M, K, N, bytes/element) of every GEMM of the workload (or only those
    named `kernel`: a kernel name, or phase/kernel as the command prints it), for
    `mapshard bounds`."""
    gemms = []
    for phase in workload.phases:
        for k in phase.graph.kernels:
            dims = solver_api.gemm_dims(k)
            name = f"{phase.name}/{k.name}"
            if dims is None or (kernel and kernel not in (k.name, name)):
                continue
            gemms.append((name, *dims))
    return gemms


def frontier_points(
    m: int, k: int, n: int, bytes_per_element: float
) -> list[tuple[float, float, float, str, int, int]]:
    """(buffer bytes, DRAM bytes, FLOP per DRAM byte, family, Tm, Tn), buffer ascending."""
    flop = 2.0 * m * k * n
    out = []
    for p in solver_api.gemm_frontier(int(m), int(k), int(n)):
        traffic = p.traffic * bytes_per_element
        out.append(
            (p.buffer * bytes_per_element, traffic, flop / traffic, p.family, p.tile_m, p.tile_n)
        )
    return out


def _split(size: int, shards: int) -> int:
    return max(1, math.ceil(size / max(1, shards)))


def gemm_shape(
    plan_kernel: KernelPlan, shards: int, kernel: Kernel | None = None
) -> tuple[int, int, int, float] | None:
    """Per-chip (M, K, N, bytes/element) of a GEMM, or None when it cannot be told.

    With the graph's Kernel: K = reduction dims, N = the other dims of the weight/second
    input, M = everything else (grouped heads stack into M, as the solver does); a batch
    dim shared by both inputs means independent GEMMs, for which there is no single
    frontier. Without the Kernel the loop dims must be named m, k, n. The dim named by the
    sharding is divided by the number of shards.
    """
    if plan_kernel.kind not in ("GEMM", "BATCHED_GEMM"):
        return None
    sizes = dict(plan_kernel.dims)
    split_dim = plan_kernel.sharding.split("+")[0]
    if split_dim in sizes:
        sizes[split_dim] = _split(sizes[split_dim], shards)
    if kernel is not None:
        inputs = [o for o in kernel.inputs if o.role != OperandRole.KV_CACHE] or list(kernel.inputs)
        if len(inputs) < 2:
            return None
        red = set(kernel.reduction_dims)
        a = next((o for o in inputs if o.role == OperandRole.INPUT), inputs[0])
        b = next(o for o in inputs if o is not a)
        if any(d in b.dims and d not in red for d in a.dims):
            return None  # a true batch of independent GEMMs: no single frontier
        n_dims = [d for d in b.dims if d not in red]
        m_dims = [d for d in sizes if d not in red and d not in n_dims]
        if not red or not n_dims or not m_dims:
            return None
        bpe = b.bytes_per_element or a.bytes_per_element or 2.0
        return (
            math.prod(sizes[d] for d in m_dims),
            math.prod(sizes[d] for d in red),
            math.prod(sizes[d] for d in n_dims),
            bpe,
        )
    lower = {d.lower(): s for d, s in sizes.items()}
    whole = {d.lower(): s for d, s in plan_kernel.dims}
    if plan_kernel.kind != "GEMM" or set(lower) != {"m", "k", "n"}:
        return None
    if plan_kernel.weight_bytes > 0:
        bpe = plan_kernel.weight_bytes / (whole["k"] * whole["n"])
    elif plan_kernel.activation_bytes > 0:
        bpe = plan_kernel.activation_bytes / (whole["m"] * (whole["k"] + whole["n"]))
    else:
        bpe = 2.0
    return lower["m"], lower["k"], lower["n"], bpe


def bounds_csv(kernels: Sequence[tuple[str, int, int, int, float]], buffer_bytes_max: float) -> str:
    """The frontier of every GEMM as CSV text."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(BOUNDS_COLUMNS)
    for name, m, k, n, bpe in kernels:
        for b, q, oi, fam, tm, tn in frontier_points(m, k, n, bpe):
            writer.writerow(
                [
                    name,
                    m,
                    k,
                    n,
                    num(bpe),
                    num(b),
                    num(q),
                    num(oi),
                    fam,
                    tm,
                    tn,
                    int(b <= buffer_bytes_max),
                ]
            )
    return buf.getvalue()


def frontier_curves(
    kernels: Sequence[tuple[str, int, int, int, float]],
    chosen: dict[str, tuple[float, float]] | None = None,
) -> list[dict[str, Any]]:
    """Plot input for plots.frontier_svg."""
    curves = []
    for name, m, k, n, bpe in kernels:
        pts = frontier_points(m, k, n, bpe)
        curves.append(
            {
                "name": f"{name} ({m}x{k}x{n})",
                "points": [p[:3] for p in pts],
                "chosen": (chosen or {}).get(name),
            }
        )
    return curves


def bounds_files(
    kernels: list[tuple[str, int, int, int, float]], buffer_bytes_max: float
) -> dict[str, str]:
    """bounds.csv and bounds.svg (name -> text) for GEMMs given as (name, M, K, N,
    bytes/element)."""
    return {
        "bounds.csv": bounds_csv(kernels, buffer_bytes_max),
        "bounds.svg": frontier_svg(frontier_curves(kernels), buffer_bytes_max),
    }


# bytes per element -> the precision whose peak a GEMM of that element size runs at
PRECISION_OF_BYTES = {0.5: "int4", 1.0: "fp8", 2.0: "bf16", 4.0: "fp32", 8.0: "fp64"}
MAX_SUMMARY_GEMMS = 12


@dataclass(frozen=True)
class GemmBound:
    """One GEMM's data-movement bound at the chip's SRAM and its roofline time."""

    name: str
    m: int
    k: int
    n: int
    precision: str
    flop: float
    dram_bytes: float | None  # least traffic with a tile that fits SRAM (None: none fits)
    compulsory_bytes: float  # least traffic with any buffer (each operand once)
    compulsory_buffer_bytes: float  # the least buffer that reaches it
    least_buffer_bytes: float  # the least buffer any tile needs
    compute_s: float  # FLOP / peak
    memory_s: float | None  # dram_bytes / DRAM bandwidth

    @property
    def intensity(self) -> float | None:
        return self.flop / self.dram_bytes if self.dram_bytes else None

    @property
    def binds(self) -> str:
        if self.memory_s is None:
            return "SRAM (no tile fits)"
        return "compute" if self.compute_s >= self.memory_s else "memory"


def gemm_bounds(
    kernels: Sequence[tuple[str, int, int, int, float]], system: System
) -> list[GemmBound]:
    """Each GEMM's least DRAM traffic at the chip's SRAM (the frontier's best fitting point)
    and its roofline time at peak: max(FLOP / peak FLOP/s, traffic / DRAM bandwidth)."""
    sram, bw = system.chip.sram_bytes, system.dram.bandwidth_Bps
    out = []
    for name, m, k, n, bpe in kernels:
        pts = frontier_points(m, k, n, bpe)
        least = min(q for _, q, *_ in pts)
        fitting = [q for b, q, *_ in pts if b <= sram]
        traffic = min(fitting) if fitting else None
        precision = PRECISION_OF_BYTES.get(float(bpe), "bf16")
        flop = 2.0 * m * k * n
        out.append(
            GemmBound(
                name=name,
                m=m,
                k=k,
                n=n,
                precision=precision,
                flop=flop,
                dram_bytes=traffic,
                compulsory_bytes=least,
                compulsory_buffer_bytes=min(b for b, q, *_ in pts if q <= least),
                least_buffer_bytes=pts[0][0],
                compute_s=flop / system.chip.peak(precision),
                memory_s=traffic / bw if traffic is not None and bw > 0 else None,
            )
        )
    return out


def bounds_summary(bounds: Sequence[GemmBound], system: System) -> list[str]:
    """Terminal lines: the chip's ridge point, then per GEMM (heaviest first) its least
    traffic at SRAM, intensity, roofline time and the resource that binds."""
    chip, bw = system.chip, system.dram.bandwidth_Bps
    lines = [
        f"{len(bounds)} GEMM(s) on {chip.name or 'the chip'}: SRAM {fmt_bytes(chip.sram_bytes)}"
        f", DRAM {fmt_si(bw, 'B/s')}; times at peak FLOP/s and bandwidth (lower bounds)"
    ]
    heavy = sorted(bounds, key=lambda b: (-max(b.compute_s, b.memory_s or 0.0), b.name))
    for b in heavy[:MAX_SUMMARY_GEMMS]:
        peak = chip.peak(b.precision)
        ridge = peak / bw if bw > 0 else float("inf")
        head = f"  {b.name} {b.m}x{b.k}x{b.n} {b.precision}: "
        if b.dram_bytes is None or b.memory_s is None or b.intensity is None:
            lines.append(
                head + f"no tile fits SRAM {fmt_bytes(chip.sram_bytes)} (needs "
                f">= {fmt_bytes(b.least_buffer_bytes)})"
            )
            continue
        at_sram = (
            "compulsory"
            if b.dram_bytes <= b.compulsory_bytes
            else f"compulsory {fmt_bytes(b.compulsory_bytes)} needs "
            f"{fmt_bytes(b.compulsory_buffer_bytes)} of buffer"
        )
        lines.append(
            head + f"DRAM >= {fmt_bytes(b.dram_bytes)} ({at_sram}), "
            f"{b.intensity:.3g} FLOP/B vs ridge {ridge:.3g} FLOP/B: {b.binds}-bound, "
            f">= {fmt_time(max(b.compute_s, b.memory_s))} (compute {fmt_time(b.compute_s)}, "
            f"memory {fmt_time(b.memory_s)})"
        )
    if len(heavy) > MAX_SUMMARY_GEMMS:
        lines.append(f"  ... {len(heavy) - MAX_SUMMARY_GEMMS} more in bounds.csv")
    tally: dict[str, int] = {}
    for b in bounds:
        tally[b.binds] = tally.get(b.binds, 0) + 1
    lines.append(
        "Binding: " + ", ".join(f"{res} {n} of {len(bounds)}" for res, n in sorted(tally.items()))
    )
    return lines
