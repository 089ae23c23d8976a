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


def demand_order(problem: MappingProblem) -> list[int]:
    """A topological order as a computation runs on demand: each sink (in the problem's
    order) pulls its producers first, depth first, so a kernel with no producer (a
    recomputation reading a checkpoint) runs just before its first consumer rather than
    at the start; then each sink (a weight update) moves up to just after its last
    producer. On L layers of a training step in one graph this is every forward layer in
    turn, then every layer's recomputation and backward in turn: the same block repeated,
    where an order by level interleaves the layers."""
    n = len(problem.kernels)
    pred: list[list[int]] = [[] for _ in range(n)]
    has_succ = [False] * n
    for e in problem.edges:
        if e.src != e.dst and not e.wrap:
            pred[e.dst].append(e.src)
            has_succ[e.src] = True
    for p in pred:
        p.sort()
    placed = [False] * n
    order: list[int] = []
    for sink in (k for k in range(n) if not has_succ[k]):
        stack = [(sink, 0)]
        while stack:  # iterative post-order: a chain of thousands of kernels is deep
            k, i = stack.pop()
            if placed[k]:
                continue
            todo = [p for p in pred[k][i:] if not placed[p]]
            if todo:
                stack.append((k, pred[k].index(todo[0]) + 1))
                stack.append((todo[0], 0))
                continue
            placed[k] = True
            order.append(k)
    return _sinks_early(order, pred, has_succ)


def _sinks_early(order: list[int], pred: list[list[int]], has_succ: list[bool]) -> list[int]:
    """`order` with each sink right after its last producer (still topological: nothing
    depends on a sink)."""
    pos = {k: i for i, k in enumerate(order)}
    after: dict[int, list[int]] = {}
    for k in order:
        if not has_succ[k] and pred[k]:
            after.setdefault(max(pred[k], key=pos.__getitem__), []).append(k)
    out: list[int] = []
    for k in order:
        if not has_succ[k] and pred[k]:
            continue
        out.append(k)
        out.extend(after.get(k, ()))
    return out


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
