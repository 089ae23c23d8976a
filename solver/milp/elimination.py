"""Min-sum bucket elimination over small discrete variables (solver.milp.exact_kbk).

A factor is (variables, table): the table's axes follow the variables, its entries are
complex numbers cost + 1j * tie-break, which numpy adds componentwise and orders
lexicographically (real part first) in min and argmin, so one elimination minimises the
cost and, among equal costs, the tie-break. Exact for any factors; the time and memory are
those of the largest table, which the variable order (smallest combined table first)
keeps small on graphs of low width.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from solver.options import past

Factor = tuple[tuple[int, ...], np.ndarray]  # (variables in axis order, table)


class PastDeadline(Exception):
    """The wall-clock valve tripped during an elimination (`eliminate`'s deadline)."""


def eliminate(
    factors: Sequence[Factor], domains: Sequence[int], limit: int, deadline: float = math.inf
) -> tuple[complex, list[int]] | None:
    """min over all assignments of the sum of the factors, and a minimising assignment
    (the first minimum along each eliminated axis); None when a combined table would pass
    `limit` entries. Variables are 0..len(domains)-1. Raises PastDeadline once the valve's
    `deadline` has passed (solver.options.past, checked every variable)."""
    pending: dict[int, Factor] = dict(enumerate(factors))
    where: dict[int, set[int]] = {v: set() for v in range(len(domains))}
    for i, (vars_, _) in pending.items():
        for v in vars_:
            where[v].add(i)
    trail: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    constant, next_id = 0j, len(pending)

    def measure(v: int) -> tuple[int, tuple[int, ...]]:
        scope = tuple(sorted({v, *(u for i in where[v] for u in pending[i][0])}))
        return math.prod(domains[u] for u in scope), scope

    sizes = {v: measure(v) for v in where}
    heap = [(size, v) for v, (size, _) in sizes.items()]
    heapq.heapify(heap)
    while heap:
        size, v = heapq.heappop(heap)
        if v not in sizes or sizes[v][0] != size:
            continue  # a stale entry: v is gone or its neighbourhood changed
        if past(deadline):
            raise PastDeadline
        scope = sizes.pop(v)[1]
        if size > limit:
            return None
        table = np.zeros([domains[u] for u in scope], dtype=complex)
        for i in sorted(where.pop(v)):
            vars_, t = pending.pop(i)
            table = table + expand(vars_, t, scope)
            for u in vars_:
                if u != v:
                    where[u].discard(i)
        trail.append((v, scope, table))
        rest = tuple(u for u in scope if u != v)
        reduced = table.min(axis=scope.index(v))
        if rest:
            pending[next_id] = (rest, reduced)
            for u in rest:
                where[u].add(next_id)
            next_id += 1
        else:
            constant += complex(reduced)
        for u in rest:  # their neighbourhoods changed
            sizes[u] = measure(u)
            heapq.heappush(heap, (sizes[u][0], u))
    assign = [0] * len(domains)
    for v, scope, table in reversed(trail):
        index = tuple(slice(None) if u == v else assign[u] for u in scope)
        assign[v] = int(np.argmin(table[index]))
    return constant, assign


def expand(vars_: tuple[int, ...], table: np.ndarray, scope: tuple[int, ...]) -> np.ndarray:
    """A factor's table with axes reordered and broadcast to `scope` (a superset)."""
    order = sorted(range(len(vars_)), key=lambda i: scope.index(vars_[i]))
    moved = np.transpose(table, order)
    view = [1] * len(scope)
    for i in order:
        view[scope.index(vars_[i])] = table.shape[i]
    return moved.reshape(view)
