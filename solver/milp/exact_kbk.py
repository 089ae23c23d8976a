"""Exact kernel-by-kernel optimum without a MILP: min-sum variable elimination.

Why: a kernel-by-kernel graph is one small MILP per outer choice, and HiGHS spends 20-80 ms
on each even when every kernel has one sharding; a sweep solves thousands of them. The
problem has a structure HiGHS does not see: the plan's latency is a sum of one term per
kernel, and kernel k's term depends only on its own sharding and those of the producers of
the layouts it converts (solver.check.config_cost: min over k's options of
config_latency(compute, memory, network + conversion charges into k)). A sum of small
factors over few variables is minimised exactly by variable elimination
(solver.milp.elimination), in time exponential only in the width of the interaction graph.

Variables: s[k], the sharding index of kernel k; y[g,k] in {0,1} for each consumer k of a
conversion group g (EdgeCost.group: one produced tensor read whole by several kernels),
"k pays the layout it needs". Factors:
  f_k(s[k], s[producers], y[g,k] of k's groups) = min over k's options with sharding s[k]
      that fit the SRAM of config_latency(compute, memory, network + conv of every plain
      edge into k + y[g,k] * conv of k's edge in g);
  h_g(s[consumers], y[g,.]) = 0 when every layout the consumers need has exactly one
      payer among the consumers needing it, eligible to run first among them, else inf.
Eligible: where the paying configuration changes the latency
(MappingProblem.network_overlapped), any consumer of the layout that no other consumer of
it precedes in the graph (the search picks the run order, as the MILP's order columns
do); elsewhere only the lowest kernel index, the canonical order the MILP's plan keeps.
Ties: among plans of equal latency the one storing the fewest weight elements per chip
(summed over kernels), then the first minimum of each eliminated axis (factor values are
latency + 1j * weights, ordered lexicographically by the elimination).

Exactness. Choosing each group's payers independently relaxes the real problem (one global
run order): every real plan maps to an assignment of equal cost, so the minimum is a lower
bound, and when a run order exists in which every paying kernel precedes the other
consumers of its layout (Kahn's algorithm), it is the optimum. The DRAM capacity row
(milp.model.add_memory_capacity) is left out the same way: the unconstrained optimum is
returned only when it fits. Otherwise, or when a table would pass TABLE_LIMIT entries, or
a consumer reads one group over two edges, `solve_kbk` returns None and the caller solves
the MILP. Every returned plan is re-priced by solver.check.mapping_cost and must equal the
minimum.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from solver.check import alone_bytes, mapping_cost
from solver.cost.latency import Seconds
from solver.cost.memo import Memo
from solver.cost.problem import EdgeCost, MappingProblem
from solver.milp.conversions import descendants
from solver.milp.elimination import Factor, PastDeadline, eliminate
from solver.options import past

TABLE_LIMIT = 1_000_000  # entries of one elimination table (complex: 16 MB)
MIB = 2**20
Terms = list[tuple[int, float, float, float, float]]  # _option_terms
# solutions without the DRAM row (`solve_kbk`): each key holds its problem (its menus are
# solver.cost.memo's; its edges a few kB)
UNBUDGETED = Memo(512)


@dataclass(frozen=True)
class KbkSolution:
    order: tuple[int, ...]  # the kernels in run order (one per configuration)
    choice: tuple[int, ...]  # option per kernel
    objective_s: float  # solver.check.mapping_cost of (order, choice)


@dataclass(frozen=True)
class _Group:
    """One conversion group: its producer, each consumer's edge and y variable."""

    src: int
    edge: dict[int, int]  # consumer kernel -> its edge index in the group
    pays: dict[int, int]  # consumer kernel -> its y variable


def solve_kbk(
    problem: MappingProblem, deadline: float = math.inf, keep: bool = True
) -> KbkSolution | None:
    """The exact kernel-by-kernel optimum, or None where the module docstring says so, or
    when the valve's `deadline` passes first (solver.options.past; nothing is kept then);
    `keep` False: nothing kept either way (a large DATAFLOW graph's one-off seed).

    Everything but the DRAM capacity row is kept in UNBUDGETED under the problem without
    its row (`resident_*` at their no-row defaults; every other field by value) and
    TABLE_LIMIT: the points of a sweep solve one graph's problem again under other budgets
    (the DRAM their other phases leave), and the row only accepts or refuses the
    unconstrained optimum."""
    unbudgeted = replace(problem, resident_bytes_per_param=0.0, resident_budget_bytes=math.inf)
    key = (TABLE_LIMIT, unbudgeted)
    kept = UNBUDGETED.find(key) if keep else None
    if kept is None:
        try:
            kept = (_solve_unbudgeted(problem, deadline),)
        except PastDeadline:
            return None
        if keep:
            UNBUDGETED.put(key, kept)
    found = kept[0]
    if found is None or not _fits_memory(problem, found.choice):
        return None
    return found


def _solve_unbudgeted(problem: MappingProblem, deadline: float) -> KbkSolution | None:
    """`solve_kbk` without the DRAM capacity row (PastDeadline past `deadline`)."""
    n = len(problem.kernels)
    groups = _groups(problem, n)
    if groups is None:
        return None
    domains = [len(m.shardings) for m in problem.kernels]
    domains += [2] * sum(len(g.pays) for g in groups)
    if any(math.prod(domains[k] for k in g.edge) * 2 ** len(g.edge) > TABLE_LIMIT for g in groups):
        return None  # a group factor (consumer shardings x payer bits) past the limit
    terms = [_option_terms(problem, k) for k in range(n)]
    of: list[list[_Group]] = [[] for _ in range(n)]  # the groups each kernel consumes
    for g in groups:
        for k in g.edge:
            of[k].append(g)
    built = []
    for k in range(n):
        if k % 256 == 0 and past(deadline):
            raise PastDeadline
        built.append(_kernel_factor(problem, k, of[k], domains, terms[k]))
    factors = [f for f in built if f is not None]
    if len(factors) < n:
        return None
    desc = descendants(problem)
    factors += [_group_factor(problem, g, domains, desc) for g in groups]
    solved = eliminate(factors, domains, TABLE_LIMIT, deadline)
    if solved is None or not math.isfinite(solved[0].real):
        return None  # too wide, or nothing fits: the MILP says which
    value, assign = solved[0].real, solved[1]
    choice = tuple(_best_option(problem, k, of[k], assign, terms[k]) for k in range(n))
    order = _run_order(problem, groups, assign)
    if order is None:
        return None
    total, _ = mapping_cost(problem, [(k,) for k in order], choice)
    if not math.isclose(total, value, rel_tol=1e-9, abs_tol=1e-15):
        return None  # defensive: the checker disagrees, let the MILP decide
    return KbkSolution(tuple(order), choice, total)


def _groups(problem: MappingProblem, n: int) -> list[_Group] | None:
    """Conversion groups with a y variable per consumer (ids from n on); None when a
    group's edges do not share one producer or a consumer reads the group twice."""
    by_group: dict[int, list[int]] = {}
    for i, e in enumerate(problem.edges):
        if e.group >= 0:
            by_group.setdefault(e.group, []).append(i)
    out, next_var = [], n
    for g in sorted(by_group):
        members = by_group[g]
        srcs = {problem.edges[i].src for i in members}
        edge = {problem.edges[i].dst: i for i in members}
        if len(srcs) != 1 or len(edge) != len(members):
            return None
        pays = {}
        for k in sorted(edge):
            pays[k], next_var = next_var, next_var + 1
        out.append(_Group(srcs.pop(), edge, pays))
    return out


def _kernel_factor(
    problem: MappingProblem, k: int, mine: list[_Group], domains: list[int], terms: Terms
) -> Factor | None:
    """f_k of the module docstring as a table over its variables (`mine`: the groups k
    consumes); None past TABLE_LIMIT."""
    plain = [e for e in problem.conv_in_edges(k) if e.group < 0 and _charges(e)]
    scope_set = {k, *(e.src for e in plain)}
    for g in mine:
        scope_set |= {g.src, g.pays[k]}
    scope = tuple(sorted(scope_set))
    shape = tuple(domains[v] for v in scope)
    if math.prod(shape) > TABLE_LIMIT:
        return None
    charge = np.zeros(shape)
    for e in plain:
        charge = charge + _edge_table(e, scope, shape)
    for g in mine:
        paid = np.zeros(shape[scope.index(g.pays[k])])
        paid[1] = 1.0
        view = [1] * len(scope)
        view[scope.index(g.pays[k])] = 2
        edge = problem.edges[g.edge[k]]
        charge = charge + _edge_table(edge, scope, shape) * paid.reshape(view)
    return scope, _latency_table(problem, k, charge, scope.index(k), terms)


def _charges(e: EdgeCost) -> bool:
    return any(v > 0 for row in e.conv for v in row)


def _edge_table(e: EdgeCost, scope: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """conv[s[src]][s[dst]] broadcast over the scope's axes."""
    conv = np.asarray(e.conv, dtype=float)
    view = [1] * len(scope)
    if e.src == e.dst:  # a boundary edge of a one-kernel graph onto itself
        view[scope.index(e.dst)] = len(conv)
        return np.broadcast_to(np.diag(conv).reshape(view), shape)
    a, b = scope.index(e.src), scope.index(e.dst)
    view[a], view[b] = conv.shape
    table = conv if a < b else conv.T
    return np.broadcast_to(table.reshape(view), shape)


def _group_factor(
    problem: MappingProblem, g: _Group, domains: list[int], desc: list[int]
) -> Factor:
    """h_g of the module docstring: 0 on the valid payer assignments, inf elsewhere."""
    consumers = sorted(g.edge)
    ys = [g.pays[k] for k in consumers]
    table = np.full([domains[k] for k in consumers] + [2] * len(ys), complex(math.inf, 0.0))
    edges = [problem.edges[g.edge[k]] for k in consumers]
    overlapped = problem.network_overlapped
    for shard in itertools.product(*(range(domains[k]) for k in consumers)):
        needers: dict[int, list[int]] = {}
        for j, e in enumerate(edges):
            needers.setdefault(e.layouts[shard[j]], []).append(j)
        choices = []
        for members in needers.values():
            if overlapped:
                first = [
                    j
                    for j in members
                    if not any(desc[consumers[i]] >> consumers[j] & 1 for i in members)
                ]
            else:
                first = members[:1]  # consumers are sorted by kernel index
            choices.append(first)
        for payers in itertools.product(*choices):
            y = [0] * len(ys)
            for j in payers:
                y[j] = 1
            table[(*shard, *y)] = 0.0
    scope = (*consumers, *ys)
    order = sorted(range(len(scope)), key=lambda i: scope[i])
    return tuple(scope[i] for i in order), np.transpose(table, order)


def _option_terms(problem: MappingProblem, k: int) -> Terms:
    """Kernel k's options that fit the SRAM alone: (option, compute incl. overhead,
    memory, network) in seconds, and the weight elements per chip it stores (the
    tie-break)."""
    menu = problem.kernels[k]
    capacity = problem.sram_bytes / MIB * (1 + 1e-9)  # the MILP's SRAM row
    out = []
    for (o, opt), (sram, dram) in zip(enumerate(menu.options), alone_bytes(problem, k)):
        if sram / MIB > capacity:
            continue
        mem = dram / problem.dram_bandwidth_Bps
        stored = sum(elems for _, elems in opt.weights)
        out.append((o, opt.compute_s + menu.overhead_s, mem, opt.network_s, stored))
    return out


def _latency(
    problem: MappingProblem, overhead_s: float, comp: Seconds, mem: Seconds, net: Seconds
) -> Seconds:
    """The one latency rule (solver.cost.latency.config_latency), over a charge table."""
    return problem.latency(comp, mem, net, overhead_s)


def _latency_table(
    problem: MappingProblem, k: int, charge: np.ndarray, axis: int, terms: Terms
) -> np.ndarray:
    """min over k's options of sharding s[k] (`terms`) of latency + 1j * stored weights,
    for every charge."""
    menu = problem.kernels[k]
    out = np.full(charge.shape, complex(math.inf, 0.0))
    by_sharding: dict[int, list[tuple[float, float, float, float]]] = {}
    for o, comp, mem, net, stored in terms:
        by_sharding.setdefault(menu.sharding_index(o), []).append((comp, mem, net, stored))
    for s, rows in by_sharding.items():
        index = [slice(None)] * charge.ndim
        index[axis] = s
        at = tuple(index)
        # every option of sharding s at once, stacked on a leading axis: the same sums
        # and maxima per element as one option at a time, then their least (complex
        # minimum: latency first, stored weights second)
        comp, mem, net, stored = (
            np.array(c).reshape((-1,) + (1,) * (charge.ndim - 1)) for c in zip(*rows)
        )
        lat = _latency(problem, menu.overhead_s, comp, mem, net + charge[at][np.newaxis])
        out[at] = np.minimum(out[at], np.minimum.reduce(lat + 1j * stored, axis=0))
    return out


def _best_option(
    problem: MappingProblem, k: int, mine: list[_Group], assign: list[int], terms: Terms
) -> int:
    """k's option with the chosen sharding and the least (latency, stored weights, DRAM
    time, index): at equal latency the tile moving fewer bytes (a compute-bound fused
    attention tile that re-reads K/V is not chosen over one that reads them once);
    `mine`: the groups k consumes."""
    menu, shard = problem.kernels[k], assign
    charge = sum(
        (e.conv[shard[e.src]][shard[k]] for e in problem.conv_in_edges(k) if e.group < 0), 0.0
    )
    for g in mine:
        if assign[g.pays[k]]:
            charge += problem.edges[g.edge[k]].conv[shard[g.src]][shard[k]]
    best, best_o = (math.inf, math.inf, math.inf), -1
    for o, comp, mem, net, stored in terms:
        if menu.sharding_index(o) != shard[k]:
            continue
        lat = float(_latency(problem, menu.overhead_s, comp, mem, net + charge))
        if (lat, stored, mem) < best:
            best, best_o = (lat, stored, mem), o
    return best_o


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
    """A topological order in which every paying kernel runs before the other consumers
    needing its layout: the lowest ready kernel index first (the problem's own order
    where it can); None when the payers ask for a cycle."""
    n = len(problem.kernels)
    preds = [{e.src for e in problem.in_edges(k)} for k in range(n)]
    for g in groups:
        a = assign[g.src]
        for payer, i in g.edge.items():
            e = problem.edges[i]
            if not assign[g.pays[payer]] or e.conv[a][assign[payer]] <= 0:
                continue
            layout = e.layouts[assign[payer]]
            for k, j in g.edge.items():
                if k != payer and problem.edges[j].layouts[assign[k]] == layout:
                    preds[k].add(payer)
    waiting = [len(p) for p in preds]
    after: list[list[int]] = [[] for _ in range(n)]
    for k, p in enumerate(preds):
        for u in p:
            after[u].append(k)
    ready = [k for k in range(n) if not waiting[k]]
    heapq.heapify(ready)
    placed: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        placed.append(k)
        for v in after[k]:
            waiting[v] -= 1
            if not waiting[v]:
                heapq.heappush(ready, v)
    return placed if len(placed) == n else None
