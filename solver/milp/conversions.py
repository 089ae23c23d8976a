"""Layout conversions shared by several consumers of one produced tensor, in the MILP.

A group (EdgeCost.group) pays each (producer sharding a, target layout L) once, in the
earliest configuration holding a consumer that needs L (MappingProblem.edge_charges).
  ind[e,a,L]  = [producer takes a and consumer e needs L]: p[e,a,b] (both ends with several
                shardings, the local polytope of model.add_layout_links) or the x columns
                of the end with several, summed over the b with layouts[b] = L.
Where the paying configuration cannot change the latency (one configuration holds every
consumer in the model, or the network time adds to the others): q[a,L] >= ind[e,a,L] for
every consumer e, cost(a,L) q[a,L] at the earliest such configuration.
Otherwise a binary payer y[e,a,L] per consumer:
  y[e,a,L] <= ind[e,a,L]                           the payer needs L
  sum_e y[e,a,L] >= ind[e',a,L]                    someone pays when e' needs L
  y[e,a,L] + ind[e',a,L] <= 1                      e' runs before e in every plan
  pos[e] + 1 <= pos[e'] + M (2 - y[e,a,L] - ind[e',a,L])
                                                   kernel by kernel, e and e' unordered by
                                                   the graph: the payer runs first
with pos[v] >= pos[u] + 1 on every edge (a position in the kernel-by-kernel order that the
search chooses: MilpResult.order), cost(a,L) y[e,a,L] on e's configuration.
A model of part of the plan (a segment priced alone) charges a group only when every
consumer outside it runs later (`later`): the price stays a lower bound. A producer
outside the model (or without `exact_edges`) takes its cheapest sharding per layout.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from solver.cost.problem import MappingProblem
from solver.milp.linear import LinearModel

US = 1e6  # seconds -> microseconds

Expr = dict[int, float]
Key = tuple[int, int]  # (producer sharding, -1 when the model does not see it; target layout)


class _Model(Protocol):
    """What this module reads and extends of the model under construction (model._Model)."""

    problem: MappingProblem
    configs: Sequence[Sequence[int]]
    lp: LinearModel
    members: list[int]
    network: list[dict[int, float]]
    positions: dict[int, int]
    selection: Any  # model.ConstraintSelection

    def shard_cols(self, k: int, s: int) -> tuple[int, ...]: ...


def descendants(problem: MappingProblem) -> list[int]:
    """desc[k]: bitmask of the kernels reachable from k along edges of one instance
    (the kernels are in a topological order, so one backward sweep)."""
    n = len(problem.kernels)
    desc = [0] * n
    for k in range(n - 1, -1, -1):
        for e in problem.out_edges(k):
            desc[k] |= desc[e.dst] | (1 << e.dst)
    return desc


def link_marginals(m: _Model, index: int, p: list[list[int]]) -> None:
    """The rows of model.add_layout_links for edge `index`: p's row sums are the
    producer's sharding, its column sums the consumer's."""
    e = m.problem.edges[index]
    na, nb = len(p), len(p[0])
    for a in range(na):
        row = {p[a][b]: 1.0 for b in range(nb)}
        for col in m.shard_cols(e.src, a):
            row[col] = -1.0
        m.lp.add_row(row, 0.0, 0.0, name=f"layout_link[edge={index},src={a}]")
    for b in range(nb):
        row = {p[a][b]: 1.0 for a in range(na)}
        for col in m.shard_cols(e.dst, b):
            row[col] = -1.0
        m.lp.add_row(row, 0.0, 0.0, name=f"layout_link[edge={index},dst={b}]")


def add_conversion_groups(
    m: _Model,
    groups: dict[int, list[int]],
    exact_edges: bool,
    order_free: bool,
    later: frozenset[int] | None,
) -> None:
    """Every group's charges (module docstring); `groups`: group -> its edge indices."""
    if not groups:
        return
    config_of = {k: c for c, members in enumerate(m.configs) for k in members}
    desc = descendants(m.problem)
    if later is None and len(m.configs) == 1:
        reach = 0
        for k in m.members:
            reach |= desc[k]
        later = frozenset(k for k in range(len(desc)) if reach >> k & 1)
    for members in groups.values():
        edges = [m.problem.edges[i] for i in members]
        outside = {e.dst for e in edges if e.dst not in config_of}
        if outside and (later is None or not outside <= later):
            continue  # a consumer outside may run first and pay: left out (a lower bound)
        inside = [i for i, e in zip(members, edges) if e.dst in config_of]
        if inside:
            _add_group(m, inside, config_of, desc, exact_edges, order_free)


def _add_group(
    m: _Model,
    members: list[int],
    config_of: dict[int, int],
    desc: list[int],
    exact_edges: bool,
    order_free: bool,
) -> None:
    problem = m.problem
    known = exact_edges and problem.edges[members[0]].src in config_of
    ind = {i: _indicators(m, i, known) for i in members}
    cost: dict[tuple[int, int], float] = {}
    for i in members:
        e = problem.edges[i]
        for a, row in enumerate(e.conv):
            for b, c in enumerate(row):
                key = (a if known else -1, e.layouts[b])
                cost[key] = min(cost.get(key, math.inf), c) if not known else c
    configs = {config_of[problem.edges[i].dst] for i in members}
    for key, c in sorted(cost.items()):
        if c <= 0:
            continue
        needs = [i for i in members if key in ind[i]]
        if not needs:
            continue
        if len(configs) == 1 or not problem.network_overlapped:
            _pay_once(m, key, c, needs, ind, config_of)
        else:
            _pay_first(m, key, c, needs, ind, config_of, desc, order_free)


def _indicators(m: _Model, index: int, known: bool) -> dict[tuple[int, int], Expr]:
    """ind[e,a,L] of the module docstring for edge `index`: (a, L) -> expression (a = -1
    for a producer whose sharding the model does not see)."""
    e = m.problem.edges[index]
    na, nb = len(e.conv), len(e.conv[0])
    p = None
    if known and na > 1 and nb > 1:
        p = [[m.lp.add_col(upper=1.0) for _ in range(nb)] for _ in range(na)]
        if m.selection.layout_links:
            link_marginals(m, index, p)
    out: dict[tuple[int, int], Expr] = {}
    for a in range(na if known else 1):
        for b in range(nb):
            if p is not None:
                cols: Iterable[int] = [p[a][b]]
            elif not known or na == 1:
                cols = m.shard_cols(e.dst, b)
            else:
                cols = m.shard_cols(e.src, a)
            expr = out.setdefault((a if known else -1, e.layouts[b]), {})
            for col in cols:
                expr[col] = expr.get(col, 0.0) + 1.0
    return out


def _row(m: _Model, terms: list[tuple[Expr, float]], lower: float, upper: float, name: str):
    if not m.selection.layout_links:
        return
    row: Expr = {}
    for expr, coef in terms:
        for col, v in expr.items():
            row[col] = row.get(col, 0.0) + coef * v
    m.lp.add_row(row, lower, upper, name=name)


def _pay_once(
    m: _Model,
    key: Key,
    cost: float,
    needs: list[int],
    ind: dict[int, dict[Key, Expr]],
    config_of: dict[int, int],
) -> None:
    """q[a,L] >= ind[e,a,L] for every consumer e, paid at the earliest configuration."""
    q = m.lp.add_col(upper=1.0)
    first = min(config_of[m.problem.edges[i].dst] for i in needs)
    net = m.network[first]
    net[q] = net.get(q, 0.0) + cost * US
    for i in needs:
        _row(m, [({q: 1.0}, 1.0), (ind[i][key], -1.0)], 0.0, math.inf, f"conversion_once[edge={i}]")


def _pay_first(
    m: _Model,
    key: Key,
    cost: float,
    needs: list[int],
    ind: dict[int, dict[Key, Expr]],
    config_of: dict[int, int],
    desc: list[int],
    order_free: bool,
) -> None:
    """Binary payers y[e,a,L] (module docstring): the consumer that runs first pays."""
    edges = m.problem.edges
    y = {i: m.lp.add_col(upper=1.0, integer=True) for i in needs}
    for i in needs:
        net = m.network[config_of[edges[i].dst]]
        net[y[i]] = net.get(y[i], 0.0) + cost * US
        _row(m, [({y[i]: 1.0}, 1.0), (ind[i][key], -1.0)], -math.inf, 0.0, f"payer_needs[edge={i}]")
        cover = [({y[j]: 1.0}, 1.0) for j in needs] + [(ind[i][key], -1.0)]
        _row(m, cover, 0.0, math.inf, f"payer_cover[edge={i}]")
    for i in needs:
        u = edges[i].dst
        for j in needs:
            v = edges[j].dst
            if u == v:
                continue
            if order_free:
                before = desc[v] >> u & 1  # v is an ancestor of u
                unordered = not before and not desc[u] >> v & 1
            else:
                before, unordered = config_of[v] < config_of[u], False
            if before:
                terms = [({y[i]: 1.0}, 1.0), (ind[j][key], 1.0)]
                _row(m, terms, -math.inf, 1.0, f"payer_first[edge={i},before={j}]")
            elif unordered:
                pos, big = _positions(m), len(m.problem.kernels) + 1.0
                terms = [({pos[u]: 1.0, pos[v]: -1.0, y[i]: big}, 1.0), (ind[j][key], big)]
                _row(m, terms, -math.inf, 2 * big - 1, f"payer_order[edge={i},other={j}]")


def _positions(m: _Model) -> dict[int, int]:
    """pos[k] in [0, n] for the kernel-by-kernel order, pos[v] >= pos[u] + 1 on every
    edge of one instance (created once per model)."""
    if m.positions:
        return m.positions
    n = len(m.problem.kernels)
    m.positions = {k: m.lp.add_col(upper=float(n)) for k in m.members}
    for k in m.members:
        for e in m.problem.out_edges(k):
            if e.dst in m.positions:
                row = {m.positions[e.dst]: 1.0, m.positions[k]: -1.0}
                m.lp.add_row(row, 1.0, math.inf, name=f"order[src={k},dst={e.dst}]")
    return m.positions
