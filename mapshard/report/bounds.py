"""Data-movement bounds of GEMMs: least DRAM traffic and attainable operational intensity
as a function of the on-chip buffer (solver.cost.frontier's exact frontier), as CSV and a plot.

Shows how far a kernel is from compute-bound and what a bigger buffer would buy.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from generator.graph import Kernel, OperandRole, Workload
from mapshard.fmt import num
from mapshard.report.plots import frontier_svg
from solver.api import gemm_dims, gemm_frontier
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
    named `kernel`), for `mapshard bounds`."""
    gemms = []
    for phase in workload.phases:
        for k in phase.graph.kernels:
            dims = gemm_dims(k)
            if dims is None or (kernel and k.name != kernel):
                continue
            gemms.append((f"{phase.name}/{k.name}", *dims))
    return gemms


def frontier_points(
    m: int, k: int, n: int, bytes_per_element: float
) -> list[tuple[float, float, float, str, int, int]]:
    """(buffer bytes, DRAM bytes, FLOP per DRAM byte, family, Tm, Tn), buffer ascending."""
    flop = 2.0 * m * k * n
    out = []
    for p in gemm_frontier(int(m), int(k), int(n)):
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
