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
Constraint families (times in microseconds, DESIGN.md 6: scaled to avoid tiny coefficients),
one function each, rows named `family[index=...]` (LinearModel.row_names); a
`ConstraintSelection` switches a family off for experiments:
  add_one_hot:           sum_o x[k,o] = 1                                   one_hot[kernel=k]
  add_layout_links:      sum_b p[e,a,b] = X[src,a], sum_a p[e,a,b] = X[dst,b]
                                              layout_link[edge=e,src=a] / [edge=e,dst=b]
  add_latency_epigraph:  L[c] >= each row of solver.cost.latency.epigraph_rows
                         (overlap: L >= compute, L >= memory, L >= network)
                                              latency_epigraph[config=c,rule=r]
  add_sram_capacity:     sum_{k in c} SRAM[k,o] x[k,o] <= SRAM            sram_capacity[config=c]
                         (SRAM[k,o]: solver.check.kernel_sram_bytes: tiling buffer, stream
                         buffer of a fused output, fused inputs held whole when re-read
                         or saved activations)
Objective: min sum_c L[c].
A configuration whose producers lie outside the model (a segment priced alone) takes, for
each incoming edge, the cheapest conversion over the unknown producer sharding: a valid
lower bound, used by the fusion search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from solver.by_identity import ByIdentity
from solver.check import kernel_memory_bytes, kernel_sram_bytes
from solver.cost.latency import COMPUTE, MEMORY, NETWORK, epigraph_rows
from solver.cost.problem import KernelMenu, MappingProblem
from solver.milp import linear
from solver.milp.conversions import add_conversion_groups, link_marginals
from solver.options import MIN_LEFT_S, VALVE_STOP, SolverOptions, past

US = 1e6  # seconds -> microseconds
MIB = 2**20  # SRAM rows in MiB


@dataclass(frozen=True)
class ConstraintSelection:
    """Which constraint families the model has (all by default; switching one off relaxes
    the model, for experiments: its optimum can only fall)."""

    one_hot: bool = True
    layout_links: bool = True
    latency_epigraph: bool = True
    sram_capacity: bool = True
    memory_capacity: bool = True


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
    # kernel by kernel with the order in play (`order_free`): the model's kernels in the
    # order the plan runs them; empty otherwise
    order: tuple[int, ...] = ()
    stop: str = ""  # what stopped a "time_limit" run: "time_limit" (valve), "node_limit"


def solve_configurations(
    problem: MappingProblem,
    configs: Sequence[Sequence[int]],
    options: SolverOptions,
    exact_edges: bool = True,
    backend: str = "",
    start_choice: Sequence[int] | None = None,
    cutoff_s: float = math.inf,
    selection: ConstraintSelection | None = None,
    order_free: bool = False,
    later: frozenset[int] | None = None,
) -> MilpResult:
    """Best options for fixed configurations `configs` (lists of kernel indices).

    `order_free`: the configurations are single kernels whose order the model chooses
    (kernel by kernel); `later`: kernels known to run after the model's configurations
    (default: the descendants of a one-configuration model's kernels); both decide where
    a layout conversion shared by several consumers is paid (solver.milp.conversions).

    `start_choice`: an option per kernel (all kernels) of a known solution, a warm start.
    `cutoff_s`: only solutions faster than this matter (HiGHS prunes with it, so the
    result may be no solution, or one no faster than it).

    `backend`: "highs" (HiGHS's own interface, fast) or "pyomo" (Pyomo with the solver
    named in `options.name`); empty = HiGHS directly when that is the named solver.
    `selection`: the constraint families in the model (all by default).

    With the valve already past (`options.time_limit_s` cut to MIN_LEFT_S by
    `SolverOptions.remaining` / `until_deadline`) no model is built: building one is linear
    in the graph and HiGHS would stop at once; the result says the valve stopped it."""
    if 0 < options.time_limit_s <= MIN_LEFT_S:
        return MilpResult("time_limit", math.inf, 0.0, (), 0, 0, 0, 0.0, 0.0, stop=VALVE_STOP)
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit_s if options.time_limit_s > 0 else math.inf
    try:
        m = _build(problem, configs, exact_edges, selection, order_free, later, deadline)
    except _BuildStopped:  # the valve tripped while the model was built
        build_s = time.perf_counter() - t0
        return MilpResult("time_limit", math.inf, 0.0, (), 0, 0, 0, build_s, 0.0, stop=VALVE_STOP)
    model, x_col, members = m.lp, m.x_col, m.members
    build_s = time.perf_counter() - t0
    if not backend:
        backend = "highs" if options.name == "highs" else "pyomo"
    # the valve's time counts the build: HiGHS gets what is left of it
    left_s = max(MIN_LEFT_S, options.time_limit_s - build_s) if options.time_limit_s > 0 else 0.0
    res = linear.solve(
        model,
        gap=options.gap,
        time_limit_s=left_s,
        node_limit=options.nodes,
        backend=backend,
        solver_name=options.name,
        threads=options.threads,
        start=_start_values(x_col, _undominated(m, start_choice)),
        cutoff=cutoff_s * US,
    )
    sizes = (model.num_cols, model.num_integer, len(model.rows), build_s, res.solve_s)
    if not math.isfinite(res.objective):
        return MilpResult(res.status, math.inf, res.bound / US, (), *sizes, stop=res.stop)
    choice = [-1] * len(problem.kernels)
    for k in members:
        cols = x_col[k]
        choice[k] = max(range(len(cols)), key=lambda o: (res.values[cols[o]], -o))
    objective = res.objective / US
    order = ()
    if m.positions:
        order = tuple(sorted(members, key=lambda k: (res.values[m.positions[k]], k)))
    bound = min(res.bound / US, objective)
    return MilpResult(
        res.status, objective, bound, tuple(choice), *sizes, order=order, stop=res.stop
    )


def _undominated(m: _Model, choice: Sequence[int] | None) -> list[int] | None:
    """A warm start with each option the model fixed to 0 replaced by the option that
    dominates it (no worse in every term, so the start stays feasible and no slower)."""
    if choice is None:
        return None
    return [m.dominator.get((k, o), o) for k, o in enumerate(choice)]


def _start_values(
    x_col: dict[int, list[int]], choice: Sequence[int] | None
) -> dict[int, float] | None:
    if choice is None:
        return None
    return {col: float(o == choice[k]) for k, cols in x_col.items() for o, col in enumerate(cols)}


@dataclass
class _Model:
    """The model under construction: arrays, the x column of every (kernel, option), and
    per configuration the linear expressions (column -> coefficient, microseconds or MiB)
    of its compute, memory, network and SRAM and its constant overhead."""

    problem: MappingProblem
    configs: Sequence[Sequence[int]]
    selection: ConstraintSelection
    lp: linear.LinearModel = field(default_factory=linear.LinearModel)
    x_col: dict[int, list[int]] = field(default_factory=dict)
    members: list[int] = field(default_factory=list)
    compute: list[dict[int, float]] = field(default_factory=list)
    memory: list[dict[int, float]] = field(default_factory=list)
    network: list[dict[int, float]] = field(default_factory=list)
    sram: list[dict[int, float]] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)
    # (kernel, option) fixed to 0 -> an option of the same kernel that dominates it
    dominator: dict[tuple[int, int], int] = field(default_factory=dict)
    # kernel -> its position column in a kernel-by-kernel order the model chooses
    # (solver.milp.conversions; empty when the order does not matter)
    positions: dict[int, int] = field(default_factory=dict)
    # the valve (perf_counter seconds): building a model of thousands of kernels takes
    # seconds, so its loops check it (`tick`)
    deadline: float = math.inf
    _shard_cols: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)

    def tick(self, i: int) -> None:
        """Every CHECK_EVERY steps of a building loop: stop once the valve has tripped."""
        if i % CHECK_EVERY == 0 and past(self.deadline):
            raise _BuildStopped

    def shard_cols(self, k: int, s: int) -> tuple[int, ...]:
        """The x columns of kernel k's options with sharding s (X[k,s] is their sum;
        options fixed to 0 as dominated are left out). Asked for after the dominance is
        settled (_resource_terms), once per edge and layout: kept per (k, s)."""
        key = (k, s)
        cols = self._shard_cols.get(key)
        if cols is None:
            menu = self.problem.kernels[k]
            sharding = menu.shardings[s]
            cols = self._shard_cols[key] = tuple(
                self.x_col[k][o]
                for o, opt in enumerate(menu.options)
                if opt.sharding == sharding and (k, o) not in self.dominator
            )
        return cols


CHECK_EVERY = 256  # loop steps between two looks at the valve while a model is built


class _BuildStopped(Exception):
    """The valve tripped while a model was being built (solve_configurations says so)."""


def _add(expr: dict[int, float], col: int, coef: float) -> None:
    if coef:
        expr[col] = expr.get(col, 0.0) + coef


def build_model(
    problem: MappingProblem,
    configs: Sequence[Sequence[int]],
    exact_edges: bool = True,
    selection: ConstraintSelection | None = None,
) -> tuple[linear.LinearModel, dict[int, list[int]], list[int]]:
    """The MILP of the module docstring as arrays; returns it, the x column of every
    (kernel, option) and the kernels in the model."""
    m = _build(problem, configs, exact_edges, selection)
    return m.lp, m.x_col, m.members


def _build(
    problem: MappingProblem,
    configs: Sequence[Sequence[int]],
    exact_edges: bool,
    selection: ConstraintSelection | None,
    order_free: bool = False,
    later: frozenset[int] | None = None,
    deadline: float = math.inf,
) -> _Model:
    m = _Model(problem, configs, selection or ConstraintSelection(), deadline=deadline)
    m.members = sorted({k for config in configs for k in config})
    m.x_col = {
        k: [m.lp.add_col(upper=1.0, integer=True) for _ in problem.kernels[k].options]
        for k in m.members
    }
    _resource_terms(m)
    add_one_hot(m)
    add_layout_links(m, exact_edges, order_free, later)
    latency = [m.lp.add_col(cost=1.0) for _ in configs]
    for c in range(len(configs)):
        add_latency_epigraph(m, c, latency[c])
        add_sram_capacity(m, c)
    add_memory_capacity(m)
    return m


def add_one_hot(m: _Model) -> None:
    """Every kernel takes exactly one option: sum_o x[k,o] = 1 (options fixed to 0 as
    dominated left out)."""
    if not m.selection.one_hot:
        return
    for k in m.members:
        cols = [j for o, j in enumerate(m.x_col[k]) if (k, o) not in m.dominator]
        m.lp.add_row(dict.fromkeys(cols, 1.0), 1.0, 1.0, name=f"one_hot[kernel={k}]")


def _resource_terms(m: _Model) -> None:
    """Per configuration: compute, memory and network time of the chosen options (us),
    their SRAM (MiB, stream buffers of outputs fused inside included) and overheads."""
    problem, n_cfg = m.problem, len(m.configs)
    m.compute, m.memory = [{} for _ in range(n_cfg)], [{} for _ in range(n_cfg)]
    m.network, m.sram = [{} for _ in range(n_cfg)], [{} for _ in range(n_cfg)]
    m.overhead = [0.0] * n_cfg
    for c, members in enumerate(m.configs):
        group = set(members)
        for k in members:
            m.tick(k)
            m.overhead[c] += problem.kernels[k].overhead_s * US
            terms, dominated = _kernel_terms(problem, k, group)
            for o, (comp, mem, net, sram) in enumerate(terms):
                if o in dominated:
                    continue  # fixed to 0 below: its terms would change no row
                col = m.x_col[k][o]
                _add(m.compute[c], col, comp)
                _add(m.memory[c], col, mem)
                _add(m.network[c], col, net)
                _add(m.sram[c], col, sram)
            for o, better in dominated.items():
                m.lp.col_upper[m.x_col[k][o]] = 0.0
                m.dominator[(k, o)] = better


# per problem: (kernel, status) -> its terms and dominance
_TERMS: ByIdentity[dict] = ByIdentity()


def _kernel_terms(
    problem: MappingProblem, k: int, group: set[int]
) -> tuple[list[tuple[float, float, float, float]], dict[int, int]]:
    """Kernel k's options in a configuration `group`: (compute us, memory us, network us,
    SRAM MiB) each, and the dominated ones (`dominated_options`). They depend on which of
    k's edges stay inside `group` only, so the fusion search's many MILPs over one problem
    share them."""
    known = _TERMS.get(problem, dict)
    status = (
        k,
        tuple(e.src in group for e in problem.in_edges(k)),
        tuple(e.dst in group for e in problem.out_edges(k)),
        len(group) == 1,  # alone, SRAM cannot tell options apart (below)
    )
    cached = known.get(status)
    if cached is None:
        menu = problem.kernels[k]
        raw, terms = [], []
        for o, opt in enumerate(menu.options):
            mem_bytes = kernel_memory_bytes(problem, k, o, group)
            sram = kernel_sram_bytes(problem, k, o, group)
            raw.append((opt.compute_s, mem_bytes, opt.network_s, sram))
            terms.append(
                (
                    (opt.compute_s + menu.overhead_s) * US,
                    mem_bytes / problem.dram_bandwidth_Bps * US,
                    opt.network_s * US,
                    sram / MIB,
                )
            )
        if len(group) == 1 and all(r[3] <= problem.sram_bytes * (1 + 1e-9) for r in raw):
            # alone in its configuration with every option fitting: the SRAM row cannot
            # bind, so SRAM does not tell options apart (a larger tile that reads no less
            # is dominated)
            raw = [(c, m, n, 0.0) for c, m, n, _ in raw]
        cached = known[status] = (terms, dominated_options(menu, raw))
    return cached


def dominated_options(
    menu: KernelMenu, terms: Sequence[tuple[float, float, float, float]]
) -> dict[int, int]:
    """Options of one kernel that can be fixed to 0 without changing the optimum -> the
    option dominating each: same sharding (so the same layout conversions) and the same
    stored weights, and no larger compute, DRAM bytes, network time or SRAM in this
    configuration (`terms[o]`, in that order). Swapping a dominated option for its
    dominator keeps every constraint satisfied and no configuration slower; among equal
    options the lowest index stays."""
    n = len(menu.options)
    if n < 2:
        return {}
    t = np.asarray(terms, dtype=float)
    group = {}
    key = [group.setdefault((o.sharding, o.weights), len(group)) for o in menu.options]
    same = np.equal.outer(key, key)
    # le[a, b]: option a is no worse than b in every term
    le = (t[:, None, :] <= t[None, :, :]).all(axis=2) & same
    lt = (t[:, None, :] < t[None, :, :]).any(axis=2)
    index = np.arange(n)
    beats = le & (lt | (index[:, None] < index[None, :]))
    np.fill_diagonal(beats, False)
    out: dict[int, int] = {}
    for b in np.nonzero(beats.any(axis=0))[0]:
        # the dominator: one that is itself not dominated (the relation is a strict order)
        a = int(np.nonzero(beats[:, b])[0][0])
        while beats[:, a].any():
            a = int(np.nonzero(beats[:, a])[0][0])
        out[int(b)] = a
    return out


def add_layout_links(
    m: _Model, exact_edges: bool, order_free: bool = False, later: frozenset[int] | None = None
) -> None:
    """Layout-conversion time of every edge into the model, added to its consumer's
    network time. Both ends in the model with several shardings each: p[e,a,b] with
    sum_b p[e,a,b] = X[src,a] and sum_a p[e,a,b] = X[dst,b] (the local-polytope
    linearisation of X[src,a] * X[dst,b]); one end with one sharding: linear in the other;
    producer outside the model (or not `exact_edges`): its cheapest sharding. Edges of one
    produced tensor to several consumers: solver.milp.conversions."""
    problem = m.problem
    in_model = set(m.members)
    config_of = {k: c for c, members in enumerate(m.configs) for k in members}
    groups: dict[int, list[int]] = {}
    for index, e in enumerate(problem.edges):
        m.tick(index)
        if e.group >= 0:
            groups.setdefault(e.group, []).append(index)
            continue
        if e.dst not in in_model or not any(v > 0 for row in e.conv for v in row):
            continue
        net = m.network[config_of[e.dst]]
        na, nb = len(e.conv), len(e.conv[0])
        if e.src not in in_model or not exact_edges:
            for b in range(nb):
                cost = min(e.conv[a][b] for a in range(na)) * US
                for col in m.shard_cols(e.dst, b):
                    _add(net, col, cost)
        elif na == 1 or nb == 1:
            for a in range(na):
                for b in range(nb):
                    cols = m.shard_cols(e.dst, b) if na == 1 else m.shard_cols(e.src, a)
                    for col in cols:
                        _add(net, col, e.conv[a][b] * US)
        else:
            p = [[m.lp.add_col(upper=1.0) for _ in range(nb)] for _ in range(na)]
            if m.selection.layout_links:
                link_marginals(m, index, p)
            for a in range(na):
                for b in range(nb):
                    _add(net, p[a][b], e.conv[a][b] * US)
    m.tick(0)
    add_conversion_groups(m, groups, exact_edges, order_free, later)


def add_latency_epigraph(m: _Model, c: int, latency_col: int) -> None:
    """L[c] >= every linear piece of the configuration-latency rule
    (solver.cost.latency.epigraph_rows): with overlap L >= compute, L >= memory,
    L >= network; without, L >= compute + memory + network; serialised network,
    L >= compute + network and L >= overhead + memory + network (with a hidden share, the
    network's and the other part's coefficients below 1 in turn)."""
    if not m.selection.latency_epigraph:
        return
    parts = {COMPUTE: m.compute[c], MEMORY: m.memory[c], NETWORK: m.network[c]}
    p = m.problem
    rule = epigraph_rows(p.overlap, p.serialize_network, p.network_hidden_share)
    for r, (weights, overhead_weight) in enumerate(rule):
        row: dict[int, float] = {latency_col: 1.0}
        for name, weight in weights.items():
            for col, coef in parts[name].items():
                row[col] = row.get(col, 0.0) - weight * coef
        constant = m.overhead[c] * overhead_weight
        m.lp.add_row(row, constant, linear.INF, name=f"latency_epigraph[config={c},rule={r}]")


def add_sram_capacity(m: _Model, c: int) -> None:
    """The buffers of configuration c fit the SRAM:
    sum_{k in c, o} SRAM[k,o] x[k,o] <= SRAM, SRAM[k,o] = solver.check.kernel_sram_bytes
    (tiling buffer + stream buffer if k's output is fused + the whole size of every fused
    input the tiling re-reads or that is a saved activation)."""
    if not m.selection.sram_capacity or not m.sram[c]:
        return
    capacity = m.problem.sram_bytes / MIB * (1 + 1e-9)
    m.lp.add_row(m.sram[c], -linear.INF, capacity, name=f"sram_capacity[config={c}]")


def add_memory_capacity(m: _Model) -> None:
    """The weights the chosen shardings store fit the DRAM left to them: S[w] >= the
    parameters per chip each reader k of weight w needs, sum_w S[w] * bytes_per_param <=
    budget (MiB)."""
    problem = m.problem
    per_param = problem.resident_bytes_per_param
    budget = problem.resident_budget_bytes
    if not m.selection.memory_capacity or not math.isfinite(budget) or per_param <= 0:
        return
    storage: dict[str, int] = {}
    for k in m.members:
        needs: dict[str, dict[int, float]] = {}
        for o, opt in enumerate(problem.kernels[k].options):
            for w, elems in opt.weights:
                _add(needs.setdefault(w, {}), m.x_col[k][o], elems * per_param / MIB)
        for w, need in needs.items():
            if w not in storage:
                storage[w] = m.lp.add_col()
            row = {storage[w]: 1.0, **{col: -coef for col, coef in need.items()}}
            m.lp.add_row(row, 0.0, linear.INF, name=f"weight_storage[weight={w},kernel={k}]")
    if storage:
        capacity = max(budget, 0.0) / MIB * (1 + 1e-9)
        row = {col: 1.0 for col in storage.values()}
        m.lp.add_row(row, -linear.INF, capacity, name="memory_capacity[graph]")
