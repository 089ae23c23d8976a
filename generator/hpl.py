"""HPL (High-Performance Linpack) on a P x Q process grid: right-looking blocked LU with
partial pivoting and a look-ahead of depth one (workload.hpl.depth 0: none, HPL.dat's DEPTH),
then the triangular solves.

Iteration i (panel column k = i B, m = N - k rows left, panel width nb = min(B, m),
trailing size n2 = m - nb). The matrix is spread block-cyclically over the grid, so one
process holds ceil(x / P) of the rows and ceil(y / Q) of the columns of an x x y block.
Every kernel below is ONE process's share and is pinned unsplit: the grid, not the solver,
decides how HPL divides its work (Workload.useful_flop keeps the whole run's FLOP).

Update stream (every process, iteration i):
  row_swap      the nb pivot rows of the U block row (nb x n2) sit on any of the P processes
                of a process column; each of them needs all nb rows of its own columns:
                an all-gather of nb x ceil(n2/Q) elements down the process column (group
                "hpl_col"; HPL's spread-roll swap moves that volume), then a local copy
  trsm          U12 = L11^-1 A12 on the process's columns, repeated by the P processes of
                the column (HPL does): nb (nb-1) ceil(n2/Q) FLOP
  update        A22 -= L21 U12: 2 ceil(n2/P) nb ceil(n2/Q) FLOP, the DGEMM that dominates
Critical path (the P processes of the panel's process column; HPL's look-ahead factors and
broadcasts the panel of iteration i + 1 while the update of iteration i runs):
  panel_factor  LU of the process's ceil(m/P) x nb part of the panel: the panel's FLOP
                sum_j (m-j-1) + 2 (m-j-1)(nb-j-1), over P, its part read and written once
  pivot         one per panel column, nb per panel: the column's local part scaled in
                place while the next column is searched for its largest element (read once,
                written once) by one thread block (each step waits for the one before, so
                its bytes move at one core's share of the DRAM bandwidth), then
                HPL_pdmxswp's exchange of the winner and the two rows (4 + 2 nb doubles)
                among the P processes of the column: an all-reduce ("hpl_col") of
                latency-bound size
  panel_broadcast  the factored part, ceil(m/P) x nb, along the process row ("hpl_row")
The step charges each iteration max(update stream, critical path) (without look-ahead their
sum): the critical phases name the update phase they run beside (Phase.overlaps;
solver.search.assemble.graph_times), plus the first panel, which no update hides, and the
solves.

Groups: "hpl_row" is the Q processes of a process row, "hpl_col" the P of a process column;
ranks are row-major (process (p, q) is rank p Q + q, HPL's default PMAP), so a row takes the
innermost chips of the topology (solver.search.process_grid places both).

FLOP: the blocked factorisation performs exactly the FLOP of unblocked LU, 2/3 N^3 - N^2/2
- N/6; with the two triangular solves (N^2 each) 2/3 N^3 + 3/2 N^2 - N/6, within 0.75/N of
the customary 2/3 N^3 + 2 N^2 (Workload.useful_flop).

Sampling: the N/B iterations are split into `sample_iterations` contiguous buckets; a
bucket is an update phase (count = its iterations that have a trailing matrix) and, beside
it, the panel and pivot phases of the iterations one ahead. A phase's kernels carry the mean
per-process FLOP of its iterations exactly and sizes at the root-mean-square trailing size
(so the update's matrix traffic, quadratic in n2, is exact too).
"""

from __future__ import annotations

import math
from dataclasses import replace
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
PIVOT_DOUBLES = 4  # HPL_pdmxswp's message: 4 doubles (value, row index, owner) + 2 rows
ROW = "hpl_row"  # the Q processes of a process row (the panel broadcast)
COLUMN = "hpl_col"  # the P processes of a process column (pivoting, the row swap)
# a panel column's step (search, swap, scale) is one thread block's: the next column's
# search needs this column's scaling, so the steps cannot spread over the chip's cores
PIVOT_THREAD_BLOCKS = 1


def iteration_flop(m: int, nb: int) -> tuple[float, float, float]:
    """(panel, trsm, update) FLOP of one iteration with m rows left and panel width nb."""
    n2 = m - nb
    panel = sum((m - j - 1) + 2 * (m - j - 1) * (nb - j - 1) for j in range(nb))
    return float(panel), float(nb * (nb - 1) * n2), float(2 * n2 * n2 * nb)


def default_grid(chips: int) -> tuple[int, int]:
    """HPL's customary grid for `chips` processes: P <= Q, as square as the count allows
    (the HPL tuning notes: a flat grid with P <= Q; one process per chip)."""
    p = max(d for d in range(1, math.isqrt(max(chips, 1)) + 1) if chips % d == 0)
    return p, max(chips, 1) // p


def process_share(m: int, nb: int, grid: tuple[int, int]) -> dict[str, float]:
    """One process's share of iteration (m, nb) on a P x Q grid: FLOP of its kernels and
    the elements its collectives move (module docstring)."""
    p, q = grid
    n2 = m - nb
    rows, cols, panel_rows = math.ceil(n2 / p), math.ceil(n2 / q), math.ceil(m / p)
    panel, _, _ = iteration_flop(m, nb)
    return {
        "panel": panel / p,
        "trsm": float(nb * (nb - 1) * cols),
        "update": float(2 * rows * nb * cols),
        "broadcast": float(panel_rows * nb),
        "swap": float(nb * cols),
    }


def _update_graph(name: str, n2: int, nb: int, grid: tuple[int, int], flop, bpe) -> KernelGraph:
    """The update stream of one process: row swap, trsm, DGEMM (module docstring)."""
    p, q = grid
    b = GraphBuilder(name)
    cols, rows = ("cols", math.ceil(n2 / q)), ("rows", math.ceil(n2 / p))
    panel, pk = ("panel", nb), ("panel_k", nb)
    swapped = b.add_vector(
        "row_swap",
        KernelKind.ELEMENTWISE,
        [Arg("in", IN, (panel, cols), bpe), Arg("out", OUT, (panel, cols), bpe)],
        nb * cols[1],
        communication=Communication.ALL_GATHER,
        communication_bytes=nb * cols[1] * bpe if p > 1 else 0.0,
        communication_group=COLUMN,
    )
    u12 = b.add_kernel(
        "trsm",
        KernelKind.GEMM,
        [
            Arg("l11", IN, (panel, pk), bpe),
            Arg("a12", IN, (pk, cols), bpe, swapped),
            Arg("out", OUT, (panel, cols), bpe),
        ],
        max(flop["trsm"], 1.0),
        kernel_class="Ma_Ma",
    )
    assert u12 is not None
    b.add_kernel(
        "update",
        KernelKind.GEMM,
        [
            Arg("l21", IN, (rows, panel), bpe),
            Arg("u12", IN, (panel, cols), bpe, u12),
            Arg("a22", IN, (rows, cols), bpe),
            Arg("out", OUT, (rows, cols), bpe),
        ],
        flop["update"],
        kernel_class="Ma_Ma",
    )
    return _pinned(b.graph())


def _panel_graph(name: str, m: int, nb: int, grid: tuple[int, int], flop, bpe) -> KernelGraph:
    """The critical path of one process of the panel's column: its part of the panel
    factorisation and of the broadcast (the pivots are `_pivot_graph`)."""
    p, q = grid
    b = GraphBuilder(name)
    rows, panel = ("rows", math.ceil(m / p)), ("panel", nb)
    factored = b.add_vector(
        "panel_factor",
        KernelKind.ELEMENTWISE,
        [Arg("in", IN, (rows, panel), bpe), Arg("out", OUT, (rows, panel), bpe)],
        max(flop["panel"], 1.0),
    )
    b.add_kernel(
        "panel_broadcast",
        KernelKind.COLLECTIVE,
        [Arg("in", IN, (rows, panel), bpe, factored), Arg("out", OUT, (rows, panel), bpe)],
        rows[1] * nb,
        communication=Communication.BROADCAST,
        communication_bytes=rows[1] * nb * bpe if q > 1 else 0.0,
        communication_group=ROW,
    )
    return _pinned(b.graph())


def _pivot_graph(name: str, m: int, nb: int, grid: tuple[int, int], bpe: float) -> KernelGraph:
    """One pivot of the panel factorisation on one process of the panel's column: the
    local column part scaled by its pivot in place while the next column is searched for
    its largest element (the fused column step of a panel LU: the column read once and
    written once), then the winner and the two rows exchanged among the P processes of the
    column (HPL_pdmxswp). Each step waits for the one before, so it is one cooperating
    thread block's work (`PIVOT_THREAD_BLOCKS`), not the chip's."""
    p, _ = grid
    b = GraphBuilder(name)
    rows, one = ("rows", math.ceil(m / p)), ("column", 1)
    b.add_vector(
        "pivot",
        KernelKind.ELEMENTWISE,
        [Arg("in", IN, (rows, one), bpe), Arg("out", OUT, (rows, one), bpe)],
        rows[1],
        communication=Communication.ALL_REDUCE,
        communication_bytes=(PIVOT_DOUBLES + 2 * nb) * bpe if p > 1 else 0.0,
        communication_group=COLUMN,
    )
    graph = b.graph()
    pivot = replace(graph.kernels[0], thread_blocks=PIVOT_THREAD_BLOCKS)
    return _pinned(replace(graph, kernels=(pivot,)))


def _mean_share(ms: list[tuple[int, int]], grid: tuple[int, int]) -> dict[str, float]:
    """The mean per-process share over iterations `ms` (exact FLOP per sampled phase)."""
    shares = [process_share(m, nb, grid) for m, nb in ms]
    return {key: sum(s[key] for s in shares) / len(shares) for key in shares[0]}


def _pinned(graph: KernelGraph) -> KernelGraph:
    """Every kernel one process's share, never split further."""
    return replace(graph, kernels=tuple(replace(k, pinned_sharding="none") for k in graph.kernels))


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


def _check(req: setup_pb2.Hpl, path: Path, num_chips: int) -> tuple[int, int]:
    """Every problem of the request at once; the process grid (P, Q) it runs on."""
    where = f"{path}: workload.hpl"
    bad = [
        f"{where}.{f} must be > 0, got {getattr(req, f)}"
        for f in ("N", "B")
        if getattr(req, f) <= 0
    ]
    bad += [
        f"{where}.{f} must be >= 0 (0 = HPL's customary grid), got {getattr(req, f)}"
        for f in ("X", "Y")
        if getattr(req, f) < 0
    ]
    if req.sample_iterations < 0:
        bad.append(f"{where}.sample_iterations must be >= 0, got {req.sample_iterations}")
    if req.HasField("depth") and req.depth < 0:
        bad.append(f"{where}.depth must be >= 0 (0 = no look-ahead, unset = 1), got {req.depth}")
    if req.B > req.N > 0:
        bad.append(f"{where}.B ({req.B}) must be <= N ({req.N})")
    elif req.N > 0 and req.B > 0 and math.ceil(req.N / req.B) > MAX_ITERATIONS:
        least = math.ceil(req.N / MAX_ITERATIONS)
        bad.append(
            f"{where}: N/B = {math.ceil(req.N / req.B):,} block iterations is more than can be "
            f"modelled ({MAX_ITERATIONS:,}); give B >= {least:,} (real HPL runs use 128-1024)"
        )
    if req.sample_iterations > MAX_SAMPLES:
        bad.append(
            f"{where}.sample_iterations must be <= {MAX_SAMPLES}, got {req.sample_iterations}"
        )
    chips = max(num_chips, 1)
    grid = _grid(req.X, req.Y, chips)
    if grid is None and req.X >= 0 and req.Y >= 0:
        shape = (
            f"{req.X} x {req.Y} = {req.X * req.Y} processes"
            if req.X and req.Y
            else (f"{req.X or '?'} x {req.Y or '?'}")
        )
        bad.append(
            f"{where}: the process grid X x Y = {shape} does not match the system's {chips} "
            f"chips; give X x Y = {chips} (or leave X and Y at 0)"
        )
    if bad:
        raise SetupError(bad)
    assert grid is not None
    return grid


def _grid(x: int, y: int, chips: int) -> tuple[int, int] | None:
    """(P, Q) from the setup's X and Y (either may be 0: the other divides the chips)."""
    if x > 0 and y > 0:
        return (x, y) if x * y == chips else None
    if x > 0 or y > 0:
        given = x or y
        if chips % given:
            return None
        return (given, chips // given) if x > 0 else (chips // given, given)
    return default_grid(chips)


def hpl_workload(req: setup_pb2.Hpl, prec: Precision, path: Path, num_chips: int = 0) -> Workload:
    """`num_chips`: the resolved system's chips, one process each (0: one process)."""
    grid = _check(req, path, num_chips)
    look_ahead = req.depth > 0 if req.HasField("depth") else True
    n, blk = req.N, req.B
    bpe = prec.activation_bytes
    iters = math.ceil(n / blk)
    samples = min(req.sample_iterations or DEFAULT_SAMPLES, iters)
    bounds = [round(i * iters / samples) for i in range(samples + 1)]
    iteration = [(n - i * blk, min(blk, n - i * blk)) for i in range(iters)]
    total = sum(sum(iteration_flop(m, nb)) for m, nb in iteration)
    # the first panel: factored, pivoted and broadcast before any update can hide it
    m0, nb0 = iteration[0]
    first = process_share(m0, nb0, grid)
    phases = [
        Phase("first_panel", _panel_graph("first_panel", m0, nb0, grid, first, bpe)),
        Phase("first_pivot", _pivot_graph("first_pivot", m0, nb0, grid, bpe), nb0),
    ]
    for lo, hi in zip(bounds, bounds[1:]):
        name = f"lu_{lo:05d}"
        ms = [(m, nb) for m, nb in iteration[lo:hi] if m > nb]  # the last has no update
        if ms:
            flop = _mean_share(ms, grid)
            n2 = round(math.sqrt(sum((m - nb) ** 2 for m, nb in ms) / len(ms)))
            graph = _update_graph(name, n2, ms[0][1], grid, flop, bpe)
            phases.append(Phase(name, graph, len(ms)))
        # beside update i runs the critical path of iteration i + 1 (look-ahead depth 1);
        # without look-ahead it runs after it
        ahead = iteration[lo + 1 : hi + 1]
        if ms and ahead:
            flop = _mean_share(ahead, grid)
            m_rep = round(math.sqrt(sum(m * m for m, _ in ahead) / len(ahead)))
            nb = ahead[0][1]
            panel = _panel_graph(f"{name}_panel", m_rep, nb, grid, flop, bpe)
            pivot = _pivot_graph(f"{name}_pivot", m_rep, nb, grid, bpe)
            beside = name if look_ahead else ""
            phases.append(Phase(f"{name}_panel", panel, len(ahead), overlaps=beside))
            phases.append(Phase(f"{name}_pivot", pivot, len(ahead) * nb, overlaps=beside))
    phases.append(Phase("solve", _solve_graph(n, bpe), role="head"))
    p, q = grid
    return Workload(
        kind="hpl",
        phases=tuple(phases),
        # [A | b] is factorised in place: N (N + 1) elements once over the process grid;
        # each process also holds the panel it applies, the look-ahead panel and its share
        # of the U block row
        resident_bytes=n * (n + 1) * bpe,
        workspace_bytes=(2 * math.ceil(n / p) + math.ceil(n / q)) * blk * bpe,
        activation_bytes_per_element=bpe,
        weight_bytes_per_param=bpe,
        compute_dtype=prec.math,
        process_grid=grid,
        useful_flop=total + 2.0 * n * n,
        notes=(
            f"N={n}, B={blk}: {iters} iterations in {samples} sampled phases; process grid "
            f"{p} x {q} (row-major); "
            + (
                "look-ahead depth 1: each iteration takes the longer of its update and the "
                "next panel's factorisation, pivoting and broadcast"
                if look_ahead
                else "no look-ahead: each iteration's update, then the next panel's "
                "factorisation, pivoting and broadcast"
            ),
            "FLOP = 2/3 N^3 - N^2/2 - N/6 (LU) + 2 N^2 (solves); kernels hold one process's share",
        ),
    )
