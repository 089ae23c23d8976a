"""The inner MILP for fixed configurations: one-hot option menus, pairwise layout costs and
per-configuration latency epigraphs, written as arrays (solver.milp.linear) and solved by HiGHS
directly or through Pyomo.

Variables
  x[k,o] in {0,1}         kernel k takes option o (sharding x tiling); sum_o x[k,o] = 1
  X[k,s] = sum_{o in s} x  the sharding part (an expression)
  p[e,a,b] in [0,1]        edge e joins producer sharding a and consumer sharding b:
                           sum_b p[e,a,b] = X[src,a], sum_a p[e,a,b] = X[dst,b]
                           (the local-polytope linearisation of X[src,a] * X[dst,b]; exact
                           at integral x and much tighter than three-inequality big-M)
  L[c] >= 0                latency of configuration c
Constraints (times in microseconds, DESIGN.md 6: scaled to avoid tiny coefficients)
  add_latency:  L[c] >= compute[c], L[c] >= memory[c], L[c] >= network[c]   (overlap)
                L[c] >= compute[c] + memory[c] + network[c]                (no overlap)
  add_sram:     sum_{k in c} buffer[k,o] x[k,o] + stream buffers of fused outputs <= SRAM
Objective: min sum_c L[c].
A configuration whose producers lie outside the model (a segment priced alone) takes, for
each incoming edge, the cheapest conversion over the unknown producer sharding: a valid
lower bound, used by the fusion search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from solver.check import kernel_memory_bytes
from solver.cost.latency import COMPUTE, MEMORY, NETWORK, epigraph_rows
from solver.cost.menus import MappingProblem
from solver.milp import linear
from solver.options import SolverOptions

US = 1e6  # seconds -> microseconds


@dataclass(frozen=True)
class MilpResult:
    status: str  # "optimal" | "time_limit" | "infeasible"
    objective_s: float
    bound_s: float
    choice: tuple[int, ...]  # option per kernel of the model (-1 for kernels not in it)
    num_vars: int
    num_binaries: int
    num_rows: int
    build_s: float
    solve_s: float


def solve_configurations(
    problem: MappingProblem,
    segments: Sequence[Sequence[int]],
    options: SolverOptions,
    exact_edges: bool = True,
    backend: str = "",
    start_choice: Sequence[int] | None = None,
    cutoff_s: float = math.inf,
) -> MilpResult:
    """Best options for fixed configurations `segments` (lists of kernel indices).

    `start_choice`: an option per kernel (all kernels) of a known plan, a warm start.
    `cutoff_s`: only plans faster than this matter (HiGHS prunes with it, so the result
    may be no plan, or a plan no faster than it).

    `backend`: "highs" (HiGHS's own interface, fast) or "pyomo" (Pyomo with the solver
    named in `options.name`); empty = HiGHS directly when that is the named solver."""
    t0 = time.perf_counter()
    model, x_col, members = build_model(problem, segments, exact_edges)
    build_s = time.perf_counter() - t0
    if not backend:
        backend = "highs" if options.name == "highs" else "pyomo"
    res = linear.solve(
        model,
        gap=options.gap,
        time_limit_s=options.time_limit_s,
        node_limit=options.node_limit,
        backend=backend,
        solver_name=options.name,
        threads=options.threads,
        start=_start_values(x_col, start_choice),
        cutoff=cutoff_s * US,
    )
    sizes = (model.num_cols, model.num_integer, len(model.rows), build_s, res.solve_s)
    if not math.isfinite(res.objective):
        return MilpResult(res.status, math.inf, res.bound / US, (), *sizes)
    choice = [-1] * len(problem.kernels)
    for k in members:
        cols = x_col[k]
        choice[k] = max(range(len(cols)), key=lambda o: (res.values[cols[o]], -o))
    objective = res.objective / US
    return MilpResult(res.status, objective, min(res.bound / US, objective), tuple(choice), *sizes)


def _start_values(
    x_col: dict[int, list[int]], choice: Sequence[int] | None
) -> dict[int, float] | None:
    if choice is None:
        return None
    return {col: float(o == choice[k]) for k, cols in x_col.items() for o, col in enumerate(cols)}


def build_model(
    problem: MappingProblem, segments: Sequence[Sequence[int]], exact_edges: bool = True
) -> tuple[linear.LinearModel, dict[int, list[int]], list[int]]:
    """The MILP of the module docstring as arrays; returns it, the x column of every
    (kernel, option) and the kernels in the model."""
    model = linear.LinearModel()
    members = sorted({k for seg in segments for k in seg})
    in_model = set(members)
    config_of = {k: c for c, seg in enumerate(segments) for k in seg}
    n_cfg = len(segments)
    x_col: dict[int, list[int]] = {
        k: [model.add_col(upper=1.0, integer=True) for _ in problem.kernels[k].options]
        for k in members
    }
    for k in members:
        model.add_row({j: 1.0 for j in x_col[k]}, 1.0, 1.0)

    def shard_cols(k: int, s: int) -> list[int]:
        menu = problem.kernels[k]
        return [
            x_col[k][o] for o, opt in enumerate(menu.options) if opt.sharding == menu.shardings[s]
        ]

    # per configuration: linear expressions (column -> coefficient) in microseconds
    compute: list[dict[int, float]] = [{} for _ in range(n_cfg)]
    memory: list[dict[int, float]] = [{} for _ in range(n_cfg)]
    network: list[dict[int, float]] = [{} for _ in range(n_cfg)]
    sram: list[dict[int, float]] = [{} for _ in range(n_cfg)]
    ovh = [0.0] * n_cfg

    def add(expr: dict[int, float], col: int, coef: float) -> None:
        if coef:
            expr[col] = expr.get(col, 0.0) + coef

    for c, seg in enumerate(segments):
        group = set(seg)
        for k in seg:
            menu = problem.kernels[k]
            ovh[c] += menu.overhead_s * US
            fused_out = any(e.dst in group for e in problem.out_edges(k))
            for o, opt in enumerate(menu.options):
                col = x_col[k][o]
                mem_bytes = kernel_memory_bytes(problem, k, o, group)
                add(compute[c], col, (opt.compute_s + menu.overhead_s) * US)
                add(memory[c], col, mem_bytes / problem.dram_bandwidth_Bps * US)
                add(network[c], col, opt.network_s * US)
                buf = opt.buffer_bytes + (opt.out_tile_bytes if fused_out else 0.0)
                add(sram[c], col, buf / 2**20)

    for e in problem.edges:
        if e.dst not in in_model or not any(v > 0 for row in e.conv for v in row):
            continue
        net = network[config_of[e.dst]]
        na, nb = len(e.conv), len(e.conv[0])
        if e.src not in in_model or not exact_edges:
            for b in range(nb):
                cost = min(e.conv[a][b] for a in range(na)) * US
                for col in shard_cols(e.dst, b):
                    add(net, col, cost)
        elif na == 1 or nb == 1:
            for a in range(na):
                for b in range(nb):
                    cols = shard_cols(e.dst, b) if na == 1 else shard_cols(e.src, a)
                    for col in cols:
                        add(net, col, e.conv[a][b] * US)
        else:
            # p[a,b] = X[src,a] * X[dst,b], linearised by its two marginals
            p = [[model.add_col(upper=1.0) for _ in range(nb)] for _ in range(na)]
            for a in range(na):
                row = {p[a][b]: 1.0 for b in range(nb)}
                for col in shard_cols(e.src, a):
                    row[col] = -1.0
                model.add_row(row, 0.0, 0.0)
            for b in range(nb):
                row = {p[a][b]: 1.0 for a in range(na)}
                for col in shard_cols(e.dst, b):
                    row[col] = -1.0
                model.add_row(row, 0.0, 0.0)
            for a in range(na):
                for b in range(nb):
                    add(net, p[a][b], e.conv[a][b] * US)

    latency = [model.add_col(cost=1.0) for _ in range(n_cfg)]

    def at_least(c: int, parts: list[dict[int, float]], constant: float = 0.0) -> None:
        row: dict[int, float] = {latency[c]: 1.0}
        for part in parts:
            for col, coef in part.items():
                row[col] = row.get(col, 0.0) - coef
        model.add_row(row, constant, linear.INF)

    rule = epigraph_rows(problem.overlap, problem.serialize_network)
    for c in range(n_cfg):
        parts = {COMPUTE: compute[c], MEMORY: memory[c], NETWORK: network[c]}
        for names, with_overhead in rule:
            at_least(c, [parts[n] for n in names], ovh[c] if with_overhead else 0.0)
        if sram[c]:
            model.add_row(sram[c], -linear.INF, problem.sram_bytes / 2**20 * (1 + 1e-9))
    return model, x_col, members
