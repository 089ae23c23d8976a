"""The inner MILP for fixed configurations: one-hot option menus, pairwise layout costs and
per-configuration latency epigraphs. Pyomo builds it, HiGHS solves it.

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
from solver.menus import MappingProblem
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


def _highs():
    import pyomo.environ  # noqa: F401  (registers the solvers)
    from pyomo.contrib.solver.common.factory import SolverFactory

    return SolverFactory("highs")


def solve_configurations(
    problem: MappingProblem,
    segments: Sequence[Sequence[int]],
    options: SolverOptions,
    exact_edges: bool = True,
) -> MilpResult:
    """Best options for fixed configurations `segments` (lists of kernel indices)."""
    import pyomo.environ as pyo

    t0 = time.perf_counter()
    members = sorted({k for seg in segments for k in seg})
    in_model = set(members)
    config_of = {k: c for c, seg in enumerate(segments) for k in seg}
    m = pyo.ConcreteModel(name="mapshard_configs")
    x_index = [(k, o) for k in members for o in range(len(problem.kernels[k].options))]
    m.x = pyo.Var(x_index, within=pyo.Binary)
    m.one_hot = pyo.Constraint(
        members,
        rule=lambda m, k: sum(m.x[k, o] for o in range(len(problem.kernels[k].options))) == 1,
    )

    def X(k: int, s: int):
        menu = problem.kernels[k]
        return sum(
            m.x[k, o] for o, opt in enumerate(menu.options) if opt.sharding == menu.shardings[s]
        )

    compute = {c: 0 for c in range(len(segments))}
    memory = {c: 0 for c in range(len(segments))}
    network = {c: 0 for c in range(len(segments))}
    ovh = {c: 0.0 for c in range(len(segments))}
    sram = {c: 0 for c in range(len(segments))}
    for c, seg in enumerate(segments):
        group = set(seg)
        for k in seg:
            menu = problem.kernels[k]
            ovh[c] += menu.overhead_s * US
            fused_out = any(e.dst in group for e in problem.out_edges(k))
            for o, opt in enumerate(menu.options):
                mem_bytes = kernel_memory_bytes(problem, k, o, group)
                compute[c] += (opt.compute_s + menu.overhead_s) * US * m.x[k, o]
                memory[c] += mem_bytes / problem.dram_bandwidth_Bps * US * m.x[k, o]
                network[c] += opt.network_s * US * m.x[k, o]
                buf = opt.buffer_bytes + (opt.out_tile_bytes if fused_out else 0.0)
                sram[c] += buf / 2**20 * m.x[k, o]

    pair_index = []
    for ei, e in enumerate(problem.edges):
        if e.dst not in in_model:
            continue
        c = config_of[e.dst]
        nz = any(v > 0 for row in e.conv for v in row)
        if not nz:
            continue
        na, nb = len(e.conv), len(e.conv[0])
        if e.src not in in_model or not exact_edges:
            for b in range(nb):
                network[c] += min(e.conv[a][b] for a in range(na)) * US * X(e.dst, b)
        elif na == 1:
            for b in range(nb):
                network[c] += e.conv[0][b] * US * X(e.dst, b)
        elif nb == 1:
            for a in range(na):
                network[c] += e.conv[a][0] * US * X(e.src, a)
        else:
            pair_index += [(ei, a, b) for a in range(na) for b in range(nb)]
    m.p = pyo.Var(pair_index, bounds=(0, 1))
    edges_paired = sorted({ei for ei, _, _ in pair_index})
    src_rows = [(ei, a) for ei in edges_paired for a in range(len(problem.edges[ei].conv))]
    dst_rows = [(ei, b) for ei in edges_paired for b in range(len(problem.edges[ei].conv[0]))]
    m.pair_src = pyo.Constraint(
        src_rows,
        rule=lambda m, ei, a: (
            sum(m.p[ei, a, b] for b in range(len(problem.edges[ei].conv[0])))
            == X(problem.edges[ei].src, a)
        ),
    )
    m.pair_dst = pyo.Constraint(
        dst_rows,
        rule=lambda m, ei, b: (
            sum(m.p[ei, a, b] for a in range(len(problem.edges[ei].conv)))
            == X(problem.edges[ei].dst, b)
        ),
    )
    for ei, a, b in pair_index:
        e = problem.edges[ei]
        if e.conv[a][b] > 0:
            network[config_of[e.dst]] += e.conv[a][b] * US * m.p[ei, a, b]

    configs = list(range(len(segments)))
    m.L = pyo.Var(configs, within=pyo.NonNegativeReals)
    if problem.serialize_network:
        m.lat_compute = pyo.Constraint(configs, rule=lambda m, c: m.L[c] >= compute[c] + network[c])
        m.lat_memory = pyo.Constraint(
            configs, rule=lambda m, c: m.L[c] >= ovh[c] + memory[c] + network[c]
        )
    elif problem.overlap:
        m.lat_compute = pyo.Constraint(configs, rule=lambda m, c: m.L[c] >= compute[c])
        m.lat_memory = pyo.Constraint(configs, rule=lambda m, c: m.L[c] >= memory[c])
        m.lat_network = pyo.Constraint(configs, rule=lambda m, c: m.L[c] >= network[c])
    else:
        m.lat_sum = pyo.Constraint(
            configs, rule=lambda m, c: m.L[c] >= compute[c] + memory[c] + network[c]
        )
    sram_cap = problem.sram_bytes / 2**20 * (1 + 1e-9)
    m.sram = pyo.Constraint(
        configs,
        rule=lambda m, c: (
            sram[c] <= sram_cap if not isinstance(sram[c], (int, float)) else pyo.Constraint.Skip
        ),
    )
    m.obj = pyo.Objective(expr=sum(m.L[c] for c in configs), sense=pyo.minimize)
    build_s = time.perf_counter() - t0

    solver = _highs()
    solver_options = {"random_seed": 0, "output_flag": False, "mip_rel_gap": options.gap}
    if options.node_limit:
        solver_options["mip_max_nodes"] = options.node_limit
    kwargs = {}
    if options.time_limit_s > 0:
        kwargs["time_limit"] = options.time_limit_s
    t1 = time.perf_counter()
    res = solver.solve(
        m,
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
        threads=options.threads,
        solver_options=solver_options,
        **kwargs,
    )
    solve_s = time.perf_counter() - t1
    n_vars = len(x_index) + len(pair_index) + len(configs)
    n_rows = sum(1 for _ in m.component_data_objects(pyo.Constraint, active=True))
    term = str(res.termination_condition)
    if res.incumbent_objective is None:
        status = "infeasible" if "infeasible" in term.lower() else "time_limit"
        return MilpResult(
            status, math.inf, _bound(res), (), n_vars, len(x_index), n_rows, build_s, solve_s
        )
    res.solution_loader.load_vars()
    choice = [-1] * len(problem.kernels)
    for k in members:
        vals = [pyo.value(m.x[k, o]) for o in range(len(problem.kernels[k].options))]
        choice[k] = max(range(len(vals)), key=lambda o: (vals[o], -o))
    objective = res.incumbent_objective / US
    bound = _bound(res)
    status = (
        "optimal" if "convergence" in term.lower() or "optimal" in term.lower() else "time_limit"
    )
    return MilpResult(
        status,
        objective,
        min(bound, objective),
        tuple(choice),
        n_vars,
        len(x_index),
        n_rows,
        build_s,
        solve_s,
    )


def _bound(res) -> float:
    b = res.objective_bound
    if b is None or (isinstance(b, float) and math.isinf(b)):
        return 0.0
    return max(0.0, float(b)) / US
