"""The configuration space of DATAFLOW fusion: down-sets (ideals) of the kernel DAG.

A configuration assignment with Config[u] <= Config[v] on every edge makes the kernels of
configurations 0..c a down-set (an ideal: closed under predecessors) for every c, so a plan
is a chain of ideals, empty = I_0 < I_1 < ... < I_m = all, and configuration c is the
difference I_{c+1} - I_c (DESIGN.md 7). Ideals are bitmasks over the problem's kernel
indices (a topological order). On a chain the ideals are exactly the prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence

from solver.cost.problem import MappingProblem


def predecessor_masks(problem: MappingProblem) -> list[int]:
    """pred[k]: bitmask of the direct producers of kernel k within one instance (a wrap
    edge feeds the next instance: it orders nothing, and would close a cycle)."""
    pred = [0] * len(problem.kernels)
    for e in problem.edges:
        if e.src != e.dst and not e.wrap:
            pred[e.dst] |= 1 << e.src
    return pred


def enumerate_ideals(problem: MappingProblem, limit: int) -> list[int] | None:
    """Every ideal of the DAG as a bitmask, by increasing size (the empty one first, all
    kernels last); None when there are more than `limit`."""
    n = len(problem.kernels)
    pred = predecessor_masks(problem)
    level = {0}
    out: list[int] = []
    for _ in range(n + 1):
        out.extend(sorted(level))
        if len(out) > limit:
            return None
        nxt: set[int] = set()
        for ideal in level:
            for k in range(n):
                bit = 1 << k
                if not ideal & bit and pred[k] & ideal == pred[k]:
                    nxt.add(ideal | bit)
        if not nxt:
            break
        level = nxt
    return out


# the space a large DAG's search covers (solver.fusion.solve): its order's segmentations
ONE_ORDER = "one topological order (large graph: the ideal lattice is not searched)"


def is_chain_order(problem: MappingProblem) -> bool:
    """The topological order is the only one (each kernel depends on the one before), so
    the ideals are the n + 1 prefixes and contiguous segments are the whole space."""
    pred = predecessor_masks(problem)
    return all(pred[k] >> (k - 1) & 1 for k in range(1, len(problem.kernels)))


def members(mask: int) -> list[int]:
    out, k = [], 0
    while mask:
        if mask & 1:
            out.append(k)
        mask >>= 1
        k += 1
    return out


def topological_orders(problem: MappingProblem, count: int) -> list[list[int]]:
    """Up to `count` distinct topological orders: the problem's own, then DFS-style orders
    (finish a branch before starting the next: the fusion-friendly orders of DESIGN.md 7)
    from different tie-breaks, deduplicated."""
    n = len(problem.kernels)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for e in problem.edges:
        if e.src != e.dst and not e.wrap:
            succ[e.src].append(e.dst)
            indeg[e.dst] += 1
    orders = [list(range(n))]
    keys = [
        lambda k: -k,  # latest-numbered ready kernel first (reverse tie-break)
        lambda k: k,
    ]
    for key in keys:
        orders.append(_dfs_order(n, succ, indeg, key))
    seen: set[tuple[int, ...]] = set()
    out = []
    for order in orders:
        t = tuple(order)
        if t not in seen:
            seen.add(t)
            out.append(order)
    return out[:count]


def _dfs_order(n: int, succ: list[list[int]], indeg: Sequence[int], key) -> list[int]:
    """Kahn's algorithm with a stack: the last kernel made ready runs next (depth first)."""
    deg = list(indeg)
    ready = sorted((k for k in range(n) if deg[k] == 0), key=key, reverse=True)
    order: list[int] = []
    while ready:
        k = ready.pop()
        order.append(k)
        new = []
        for v in succ[k]:
            deg[v] -= 1
            if deg[v] == 0:
                new.append(v)
        ready.extend(sorted(new, key=key, reverse=True))
    return order
