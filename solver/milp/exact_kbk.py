"""Exact kernel-by-kernel optimum without a MILP: min-sum variable elimination.

Why: a kernel-by-kernel graph is one small MILP per outer choice, and HiGHS spends 20-80 ms
on each even when every kernel has one sharding; a sweep solves thousands of them. The
problem has a structure HiGHS does not see: the plan's latency is a sum of one term per
kernel, and kernel k's term depends only on its own sharding and those of the producers of
the layouts it converts (solver.check.config_cost: min over k's options of
config_latency(compute, memory, network + conversion charges into k)). A sum of small
factors over few variables is minimised exactly by variable elimination (bucket
elimination), in time exponential only in the width of the interaction graph (2-3 for a
transformer layer).

Variables: s[k], the sharding index of kernel k; and, where a produced tensor's consumers
are not ordered by the graph and the paying configuration changes the latency
(MappingProblem.network_overlapped), pi[g], the order in which group g's consumers run (one
linear extension of the graph's order on them). The consumer that runs first among those
needing a layout pays it (MappingProblem.edge_charges). Elsewhere the payer is the first
consumer by kernel index, the canonical order the MILP's plan keeps.
Factors: f_k(s[k], s[producers of k], pi and consumer shardings of k's groups) =
min over k's options with sharding s[k] that fit the SRAM of the configuration latency.
Ties: among plans of equal latency the one storing the fewest weight elements per chip
(summed over kernels), then the first minimum along each eliminated axis; a factor's value
is the complex number latency + 1j * weights, which numpy adds componentwise and orders
lexicographically, so one elimination breaks the ties exactly.

Exactness. Choosing pi per group independently relaxes the real problem (one global run
order). Every real plan maps to an assignment of equal cost, so the elimination's minimum
is a lower bound; when the run order it asks for exists (a topological order where every
payer precedes the other consumers needing its layout, found by Kahn's algorithm), it is
the optimum. The DRAM capacity row (weights stored per chip, milp.model.add_memory_capacity)
is left out the same way: the unconstrained optimum is returned only when it fits.
Otherwise, or when a table would pass TABLE_LIMIT entries, or a group has more than
ORDER_LIMIT consumer orders, `solve_kbk` returns None and the caller solves the MILP.
Every returned plan is re-priced by solver.check.mapping_cost and must equal the minimum.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solver.check import kernel_memory_bytes, kernel_sram_bytes, mapping_cost
from solver.cost.problem import EdgeCost, MappingProblem
from solver.milp.conversions import descendants

TABLE_LIMIT = 200_000  # entries of one elimination table
ORDER_LIMIT = 24  # consumer orders of one conversion group
MIB = 2**20


@dataclass(frozen=True)
class KbkSolution:
    order: tuple[int, ...]  # the kernels in run order (one per configuration)
    choice: tuple[int, ...]  # option per kernel
    objective_s: float  # solver.check.mapping_cost of (order, choice)


@dataclass(frozen=True)
class _Group:
    """One conversion group: its producer, its edges by consumer, and the consumer orders
    the search chooses from (one when the order is fixed)."""

    src: int
    edges: dict[int, list[int]]  # consumer kernel -> its edge indices in the group
    orders: tuple[tuple[int, ...], ...]
    var: int  # the pi variable's id (-1: one order, no variable)


Factor = tuple[tuple[int, ...], np.ndarray]  # (variables in axis order, table)


def solve_kbk(problem: MappingProblem) -> KbkSolution | None:
    """The exact kernel-by-kernel optimum, or None where the module docstring says so."""
    n = len(problem.kernels)
    domains = [len(m.shardings) for m in problem.kernels]
    groups = _groups(problem, len(domains))
    if groups is None:
        return None
    domains += [len(g.orders) for g in groups if g.var >= 0]
    terms = [_option_terms(problem, k) for k in range(n)]
    factors = []
    for k in range(n):
        factor = _kernel_factor(problem, k, groups, domains, terms[k])
        if factor is None:
            return None
        factors.append(factor)
    solved = _eliminate(factors, domains)
    if solved is None:
        return None
    value, assign = solved
    if not math.isfinite(value):
        return None  # no option fits: the MILP reports the infeasibility
    choice = tuple(_best_option(problem, k, groups, assign, terms[k]) for k in range(n))
    if not _fits_memory(problem, choice):
        return None
    order = _run_order(problem, groups, assign)
    if order is None:
        return None
    total, _ = mapping_cost(problem, [(k,) for k in order], choice)
    if not math.isclose(total, value, rel_tol=1e-9, abs_tol=1e-15):
        return None  # defensive: the checker disagrees, let the MILP decide
    return KbkSolution(tuple(order), choice, total)


def _groups(problem: MappingProblem, n: int) -> list[_Group] | None:
    """Conversion groups with their consumer orders; None when one has too many orders
    or its edges do not share one producer."""
    by_group: dict[int, list[int]] = {}
    for i, e in enumerate(problem.edges):
        if e.group >= 0:
            by_group.setdefault(e.group, []).append(i)
    desc = descendants(problem) if problem.network_overlapped else []
    out, next_var = [], n
    for g in sorted(by_group):
        members = by_group[g]
        srcs = {problem.edges[i].src for i in members}
        if len(srcs) != 1:
            return None
        edges: dict[int, list[int]] = {}
        for i in members:
            edges.setdefault(problem.edges[i].dst, []).append(i)
        consumers = sorted(edges)
        if problem.network_overlapped:
            orders = _linear_extensions(consumers, desc, ORDER_LIMIT + 1)
            if len(orders) > ORDER_LIMIT:
                return None
        else:
            orders = [tuple(consumers)]  # the payer does not change the latency
        var = -1
        if len(orders) > 1:
            var, next_var = next_var, next_var + 1
        out.append(_Group(srcs.pop(), edges, tuple(orders), var))
    return out


def _linear_extensions(items: list[int], desc: list[int], cap: int) -> list[tuple[int, ...]]:
    """The orders of `items` in which no kernel runs before one of its ancestors (desc[k]:
    bitmask of k's descendants), lexicographic, at most `cap` of them."""
    out: list[tuple[int, ...]] = []

    def extend(prefix: list[int], left: list[int]) -> None:
        if len(out) >= cap:
            return
        if not left:
            out.append(tuple(prefix))
            return
        for k in left:
            if any(desc[j] >> k & 1 for j in left if j != k):
                continue  # an ancestor of k is still to run
            extend([*prefix, k], [j for j in left if j != k])

    extend([], items)
    return out


def _payer_charge(problem: MappingProblem, k: int, g: _Group, order: Sequence[int], shard) -> float:
    """Seconds kernel k pays for group g under the consumer order `order` and the
    shardings `shard` (kernel -> index): each layout k needs that no consumer before it
    needs, at k's first edge needing it (MappingProblem.edge_charges)."""
    a = shard[g.src]
    before = order[: order.index(k)]
    taken = {problem.edges[i].layouts[shard[j]] for j in before for i in g.edges[j]}
    paid, total = set(), 0.0
    for i in g.edges[k]:
        e = problem.edges[i]
        layout = e.layouts[shard[k]]
        if layout in taken or layout in paid:
            continue
        paid.add(layout)
        total += e.conv[a][shard[k]]
    return total


def _kernel_factor(
    problem: MappingProblem, k: int, groups: list[_Group], domains: list[int], terms: list
) -> Factor | None:
    """f_k of the module docstring as a table over its variables; None past TABLE_LIMIT."""
    plain = [e for e in problem.conv_in_edges(k) if e.group < 0 and _charges(e)]
    mine = [g for g in groups if k in g.edges]
    scope_set = {k, *(e.src for e in plain)}
    for g in mine:
        scope_set |= {g.src, *g.edges}
        if g.var >= 0:
            scope_set.add(g.var)
    scope = tuple(sorted(scope_set))
    shape = tuple(domains[v] for v in scope)
    if math.prod(shape) > TABLE_LIMIT:
        return None
    charge = np.zeros(shape)
    for e in plain:
        charge = charge + _edge_table(e, scope, shape)
    for g in mine:
        charge = charge + _group_table(problem, k, g, scope, domains)
    return scope, _latency_table(problem, k, charge, scope.index(k), terms)


def _charges(e: EdgeCost) -> bool:
    return any(v > 0 for row in e.conv for v in row)


def _edge_table(e: EdgeCost, scope: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """conv[s[src]][s[dst]] broadcast over the scope's axes."""
    conv = np.asarray(e.conv, dtype=float)
    if e.src == e.dst:  # a boundary edge of a one-kernel graph onto itself
        conv = np.diag(conv)
        view = [1] * len(scope)
        view[scope.index(e.dst)] = len(conv)
        return np.broadcast_to(conv.reshape(view), shape)
    a, b = scope.index(e.src), scope.index(e.dst)
    view = [1] * len(scope)
    view[a], view[b] = conv.shape
    table = conv if a < b else conv.T
    return np.broadcast_to(table.reshape(view), shape)


def _group_table(
    problem: MappingProblem, k: int, g: _Group, scope: tuple[int, ...], domains: list[int]
) -> np.ndarray:
    """k's charge for group g over the group's variables, broadcast over the scope."""
    own = sorted({g.src, *g.edges, *([g.var] if g.var >= 0 else [])})
    sub = np.zeros([domains[v] for v in own])
    for values in itertools.product(*(range(domains[v]) for v in own)):
        at = dict(zip(own, values))
        order = g.orders[at[g.var]] if g.var >= 0 else g.orders[0]
        sub[values] = _payer_charge(problem, k, g, order, at)
    view = [domains[v] if v in own else 1 for v in scope]
    return np.broadcast_to(sub.reshape(view), [domains[v] for v in scope])


def _option_terms(problem: MappingProblem, k: int) -> list[tuple[int, float, float, float, float]]:
    """Kernel k's options that fit the SRAM alone: (option, compute incl. overhead,
    memory, network) in seconds, and the weight elements per chip it stores (the tie-break)."""
    menu = problem.kernels[k]
    alone = {k}
    capacity = problem.sram_bytes / MIB * (1 + 1e-9)  # the MILP's SRAM row
    out = []
    for o, opt in enumerate(menu.options):
        if kernel_sram_bytes(problem, k, o, alone) / MIB > capacity:
            continue
        mem = kernel_memory_bytes(problem, k, o, alone) / problem.dram_bandwidth_Bps
        stored = sum(elems for _, elems in opt.weights)
        out.append((o, opt.compute_s + menu.overhead_s, mem, opt.network_s, stored))
    return out


def _latency(problem: MappingProblem, overhead_s: float, comp, mem, net):
    """solver.cost.latency.config_latency, elementwise over a charge table."""
    if problem.serialize_network:
        return overhead_s + np.maximum(comp - overhead_s, mem) + net
    if problem.overlap:
        return np.maximum(np.maximum(comp, mem), net)
    return comp + mem + net


def _latency_table(
    problem: MappingProblem, k: int, charge: np.ndarray, axis: int, terms: list
) -> np.ndarray:
    """min over k's options of sharding s[k] (`terms`: _option_terms) of the latency, for
    every charge."""
    menu = problem.kernels[k]
    out = np.full(charge.shape, complex(math.inf, 0.0))
    for o, comp, mem, net, stored in terms:
        s = menu.sharding_index(o)
        index = [slice(None)] * charge.ndim
        index[axis] = s
        lat = _latency(problem, menu.overhead_s, comp, mem, net + charge[tuple(index)])
        out[tuple(index)] = np.minimum(out[tuple(index)], lat + 1j * stored)
    return out


def _best_option(
    problem: MappingProblem, k: int, groups: list[_Group], assign: list[int], terms: list
) -> int:
    """k's option with the chosen sharding and the least (latency, stored weights, index)."""
    menu, shard = problem.kernels[k], assign
    charge = sum(
        (e.conv[shard[e.src]][shard[k]] for e in problem.conv_in_edges(k) if e.group < 0), 0.0
    )
    for g in groups:
        if k in g.edges:
            order = g.orders[assign[g.var]] if g.var >= 0 else g.orders[0]
            charge += _payer_charge(problem, k, g, order, shard)
    best, best_o = (math.inf, math.inf), -1
    for o, comp, mem, net, stored in terms:
        if menu.sharding_index(o) != shard[k]:
            continue
        lat = float(_latency(problem, menu.overhead_s, comp, mem, net + charge))
        if (lat, stored) < best:
            best, best_o = (lat, stored), o
    return best_o


def _eliminate(factors: list[Factor], domains: list[int]) -> tuple[float, list[int]] | None:
    """min over all assignments of the sum of the factors (bucket elimination, the
    variable with the smallest combined table first, lowest id on ties), and a minimising
    assignment (the first minimum along each eliminated axis); None past TABLE_LIMIT."""
    pending: dict[int, Factor] = dict(enumerate(factors))
    where: dict[int, set[int]] = {v: set() for v in range(len(domains))}
    for i, (vars_, _) in pending.items():
        for v in vars_:
            where[v].add(i)
    trail: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    constant, next_id = 0j, len(factors)
    sizes: dict[int, tuple[int, tuple[int, ...]]] = {}
    while where:
        for v in where:
            if v not in sizes:
                scope = tuple(sorted({v, *(u for i in where[v] for u in pending[i][0])}))
                sizes[v] = (math.prod(domains[u] for u in scope), scope)
        v = min(where, key=lambda u: (sizes[u][0], u))
        size, scope = sizes.pop(v)
        if size > TABLE_LIMIT:
            return None
        table = np.zeros([domains[u] for u in scope], dtype=complex)
        for i in sorted(where.pop(v)):
            vars_, t = pending.pop(i)
            table = table + _expand(vars_, t, scope)
            for u in vars_:
                if u != v:
                    where[u].discard(i)
        trail.append((v, scope, table))
        rest = tuple(u for u in scope if u != v)
        reduced = table.min(axis=scope.index(v))
        for u in rest:
            sizes.pop(u, None)  # its neighbourhood changed
        if rest:
            pending[next_id] = (rest, reduced)
            for u in rest:
                where[u].add(next_id)
            next_id += 1
        else:
            constant += complex(reduced)
    assign = [0] * len(domains)
    for v, scope, table in reversed(trail):
        index = tuple(slice(None) if u == v else assign[u] for u in scope)
        assign[v] = int(np.argmin(table[index]))
    return constant.real, assign


def _expand(vars_: tuple[int, ...], table: np.ndarray, scope: tuple[int, ...]) -> np.ndarray:
    """A factor's table with axes reordered and broadcast to `scope` (a superset)."""
    order = sorted(range(len(vars_)), key=lambda i: scope.index(vars_[i]))
    moved = np.transpose(table, order)
    view = [1] * len(scope)
    for i in order:
        view[scope.index(vars_[i])] = table.shape[i]
    return moved.reshape(view)


def _fits_memory(problem: MappingProblem, choice: Sequence[int]) -> bool:
    """The DRAM capacity row (milp.model.add_memory_capacity) holds for `choice`."""
    per_param, budget = problem.resident_bytes_per_param, problem.resident_budget_bytes
    if not math.isfinite(budget) or per_param <= 0:
        return True
    stored: dict[str, float] = {}
    for k, o in enumerate(choice):
        for w, elems in problem.kernels[k].options[o].weights:
            stored[w] = max(stored.get(w, 0.0), elems * per_param / MIB)
    return sum(stored.values()) <= max(budget, 0.0) / MIB * (1 + 1e-9)


def _run_order(problem: MappingProblem, groups: list[_Group], assign) -> list[int] | None:
    """A topological order in which every chosen payer runs before the other consumers
    needing its layout: the lowest ready kernel index first (the problem's own order
    where it can); None when the payers ask for a cycle."""
    n = len(problem.kernels)
    preds = [{e.src for e in problem.in_edges(k)} for k in range(n)]
    for g in groups:
        if g.var < 0:
            continue
        order = g.orders[assign[g.var]]
        first: dict[int, int] = {}
        for k in order:
            for i in g.edges[k]:
                e = problem.edges[i]
                layout = e.layouts[assign[k]]
                if e.conv[assign[g.src]][assign[k]] <= 0:
                    continue
                payer = first.setdefault(layout, k)
                if payer != k:
                    preds[k].add(payer)
    placed: list[int] = []
    done: set[int] = set()
    while len(placed) < n:
        ready = [k for k in range(n) if k not in done and preds[k] <= done]
        if not ready:
            return None
        placed.append(ready[0])
        done.add(ready[0])
    return placed
