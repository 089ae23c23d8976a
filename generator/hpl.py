"""HPL (High-Performance Linpack): right-looking blocked LU with partial pivoting, then the
triangular solves.

Iteration i (panel column k = i B, m = N - k rows left, panel width nb = min(B, m),
trailing size n2 = m - nb):
  panel_factor     LU of the m x nb panel: sum_j (m-j-1) + 2 (m-j-1)(nb-j-1) FLOP
  panel_broadcast  the factored panel to the process row (communication BROADCAST)
  row_swap         the panel's row interchanges applied to the nb x n2 block row
  trsm             U12 = L11^-1 A12 (unit lower L11): nb (nb-1) n2 FLOP
  update           A22 -= L21 U12: 2 n2^2 nb FLOP (the GEMM that dominates)
The blocked factorisation performs exactly the FLOP of unblocked LU, 2/3 N^3 - N^2/2 - N/6;
with the two triangular solves (N^2 each) the total is 2/3 N^3 + 3/2 N^2 - N/6, within
0.75/N of the customary 2/3 N^3 + 2 N^2.

Sampling: the N/B iterations are split into `sample_iterations` contiguous buckets, each a
phase with count = its iterations. A bucket's kernels carry the bucket's mean FLOP exactly
(so the total FLOP is exact) and sizes at the root-mean-square trailing size (so the update's
matrix traffic, quadratic in n2, is exact too). The process grid (X x Y) is a mapping choice
left to the solver; it is recorded in the notes.
"""

from __future__ import annotations

import math
from pathlib import Path

from generator.builder import Arg, GraphBuilder
from generator.graph import Communication, KernelGraph, KernelKind, Phase, Workload
from generator.ops import IN, OUT
from generator.precision import Precision
from schema import setup_pb2
from schema.errors import SetupError

MAX_ITERATIONS = 1_000_000  # N/B: block iterations the size model can sum in a second
MAX_SAMPLES = 4096  # sampled phases, each one graph to solve
DEFAULT_SAMPLES = 32  # when sample_iterations is left out: the trailing update shrinks smoothly


def iteration_flop(m: int, nb: int) -> tuple[float, float, float]:
    """(panel, trsm, update) FLOP of one iteration with m rows left and panel width nb."""
    n2 = m - nb
    panel = sum((m - j - 1) + 2 * (m - j - 1) * (nb - j - 1) for j in range(nb))
    return float(panel), float(nb * (nb - 1) * n2), float(2 * n2 * n2 * nb)


def _iteration_graph(
    name: str, m: int, nb: int, flops: tuple[float, float, float], bpe: float
) -> KernelGraph:
    b = GraphBuilder(name)
    n2 = m - nb
    rows, panel = ("rows", m), ("panel", nb)
    p_flop, t_flop, u_flop = flops
    pf = b.add_kernel(
        "panel_factor",
        KernelKind.ELEMENTWISE,
        [Arg("in", IN, (rows, panel), bpe), Arg("out", OUT, (rows, panel), bpe)],
        max(p_flop, 1.0),
        kernel_class="Va_Va",
        shardable=["rows"],
    )
    assert pf is not None
    bc = b.add_kernel(
        "panel_broadcast",
        KernelKind.COLLECTIVE,
        [Arg("in", IN, (rows, panel), bpe, pf), Arg("out", OUT, (rows, panel), bpe)],
        m * nb,
        shardable=["rows"],
        communication=Communication.BROADCAST,
        communication_bytes=m * nb * bpe,
    )
    assert bc is not None
    if n2 <= 0:
        return b.graph()
    cols, trows, pk = ("cols", n2), ("trail_rows", n2), ("panel_k", nb)
    sw = b.add_kernel(
        "row_swap",
        KernelKind.ELEMENTWISE,
        [Arg("in", IN, (panel, cols), bpe), Arg("out", OUT, (panel, cols), bpe)],
        nb * n2,
        kernel_class="Va_Va",
        shardable=["cols"],
    )
    assert sw is not None
    u12 = b.add_kernel(
        "trsm",
        KernelKind.GEMM,
        [
            Arg("l11", IN, (panel, pk), bpe, b.part(bc, (panel, pk))),
            Arg("a12", IN, (pk, cols), bpe, sw),
            Arg("out", OUT, (panel, cols), bpe),
        ],
        max(t_flop, 1.0),
        kernel_class="Ma_Ma",
        shardable=["cols"],
    )
    assert u12 is not None
    b.add_kernel(
        "update",
        KernelKind.GEMM,
        [
            Arg("l21", IN, (trows, panel), bpe, b.part(bc, (trows, panel))),
            Arg("u12", IN, (panel, cols), bpe, u12),
            Arg("a22", IN, (trows, cols), bpe),
            Arg("out", OUT, (trows, cols), bpe),
        ],
        u_flop,
        kernel_class="Ma_Ma",
        shardable=["trail_rows", "cols"],
    )
    return b.graph()


def _solve_graph(n: int, bpe: float) -> KernelGraph:
    b = GraphBuilder("solve")
    rows, cols = ("rows", n), ("cols", n)
    y = b.add_kernel(
        "forward_solve",
        KernelKind.ELEMENTWISE,
        [
            Arg("lu", IN, (rows, cols), bpe),
            Arg("rhs", IN, (cols,), bpe),
            Arg("out", OUT, (rows,), bpe),
        ],
        n * n,
        kernel_class="Va_Va",
        shardable=["rows"],
    )
    b.add_kernel(
        "back_solve",
        KernelKind.ELEMENTWISE,
        [
            Arg("lu", IN, (rows, cols), bpe),
            Arg("rhs", IN, (cols,), bpe, y),
            Arg("out", OUT, (rows,), bpe),
        ],
        n * n,
        kernel_class="Va_Va",
        shardable=["rows"],
    )
    return b.graph()


def hpl_workload(req: setup_pb2.Hpl, prec: Precision, path: Path, num_chips: int = 0) -> Workload:
    """`num_chips`: the resolved system's chips, which a given process grid must match."""
    where = f"{path}: workload.hpl"
    bad = [
        f"{where}.{f} must be > 0, got {getattr(req, f)}"
        for f in ("N", "B")
        if getattr(req, f) <= 0
    ]
    bad += [
        f"{where}.{f} must be >= 0 (0 = searched), got {getattr(req, f)}"
        for f in ("X", "Y", "sample_iterations")
        if getattr(req, f) < 0
    ]
    if req.B > req.N > 0:
        bad.append(f"{where}.B ({req.B}) must be <= N ({req.N})")
    elif req.N > 0 and req.B > 0 and math.ceil(req.N / req.B) > MAX_ITERATIONS:
        least = math.ceil(req.N / MAX_ITERATIONS)
        bad.append(
            f"{where}: N/B = {math.ceil(req.N / req.B):,} block iterations is more than can be "
            f"modelled ({MAX_ITERATIONS:,}); give B >= {least:,} (real HPL runs use 128-1024)"
        )
    if req.X > 0 and req.Y > 0 and num_chips > 0 and req.X * req.Y != num_chips:
        bad.append(
            f"{where}: the process grid X x Y = {req.X} x {req.Y} = {req.X * req.Y} processes "
            f"does not match the system's {num_chips} chips; give X x Y = {num_chips} "
            "(or leave X and Y at 0)"
        )
    if req.sample_iterations > MAX_SAMPLES:
        bad.append(
            f"{where}.sample_iterations must be <= {MAX_SAMPLES}, got {req.sample_iterations}"
        )
    if bad:
        raise SetupError(bad)
    n, blk = req.N, req.B
    bpe = prec.activation_bytes
    iters = math.ceil(n / blk)
    samples = min(req.sample_iterations or DEFAULT_SAMPLES, iters)
    phases = []
    bounds = [round(i * iters / samples) for i in range(samples + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        ms = [(n - i * blk, min(blk, n - i * blk)) for i in range(lo, hi)]
        count = len(ms)
        sums = [sum(f) for f in zip(*(iteration_flop(m, nb) for m, nb in ms))]
        mean = (sums[0] / count, sums[1] / count, sums[2] / count)
        nb = ms[0][1]
        n2 = round(math.sqrt(sum((m - w) ** 2 for m, w in ms) / count))
        if n2 == 0 and sums[2] > 0:
            n2 = 1
        m_rep = n2 + nb
        graph = _iteration_graph(f"lu_{lo:05d}", m_rep, nb, mean, bpe)
        phases.append(Phase(f"lu_{lo:05d}", graph, count=count))
    phases.append(Phase("solve", _solve_graph(n, bpe), role="head"))
    grid = f"{req.X or '?'} x {req.Y or '?'}"
    return Workload(
        kind="hpl",
        phases=tuple(phases),
        # [A | b] is factorised in place: N (N + 1) elements once over the process grid;
        # each process also holds at most one broadcast panel (N x B)
        resident_bytes=n * (n + 1) * bpe,
        workspace_bytes=n * blk * bpe,
        activation_bytes_per_element=bpe,
        weight_bytes_per_param=bpe,
        compute_dtype=prec.math,
        notes=(
            f"N={n}, B={blk}: {iters} iterations in {samples} sampled phases; process grid {grid}",
            "FLOP = 2/3 N^3 - N^2/2 - N/6 (LU) + 2 N^2 (solves)",
        ),
    )
