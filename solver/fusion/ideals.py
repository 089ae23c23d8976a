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
    """A topological order as a computation runs on demand. The kernels the deepest
    outputs need (the ancestors of the sinks at the greatest depth, depth = the longest
    path from a source: a training step's last input gradient) are pulled depth first from
    those sinks, each kernel's deepest producer first, so a kernel runs just before the
    consumer that needs it: a recomputation reading a checkpoint right before its layer's
    backward, not after its producer. Every other kernel (a weight update, the forward of a
    last layer whose output leaves the graph, a recomputed tensor no backward reads) runs
    as soon as its last producer has, so its inputs are not held across the order. On L
    layers of a training step in one graph this is every forward layer in turn, then every
    layer's recomputation and backward in turn: the same block repeated. Pulling from the
    sinks in index order instead let a dead-end recomputation (its own sink) pull every
    layer's recomputation ahead of the first backward: on 71 chained GPT-3 layers the
    search's plan was 23% above its bound at 60 CPU-s, 3.9% in this order."""
    n = len(problem.kernels)
    pred: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for e in problem.edges:
        if e.src != e.dst and not e.wrap:
            pred[e.dst].append(e.src)
            succ[e.src].append(e.dst)
    depth = _depths(pred, succ)
    sinks = [k for k in range(n) if not succ[k]]
    top = max((depth[k] for k in sinks), default=0)
    deepest = [k for k in sinks if depth[k] == top]
    live = _ancestors(deepest, pred)
    for p in pred:
        p.sort(key=lambda q: (-depth[q], q))
    order = _Placer(pred, succ, live)
    for k in range(n):
        if not pred[k] and not live[k]:
            order.place(k)
    for sink in deepest:
        stack = [(sink, 0)]
        while stack:  # iterative post-order: a chain of thousands of kernels is deep
            k, i = stack.pop()
            if order.placed[k]:
                continue
            todo = [p for p in pred[k][i:] if not order.placed[p]]
            if todo:
                stack.append((k, pred[k].index(todo[0]) + 1))
                stack.append((todo[0], 0))
                continue
            order.place(k)
    return order.order


def _depths(pred: list[list[int]], succ: list[list[int]]) -> list[int]:
    """Longest path (in edges) from a source to each kernel."""
    depth = [0] * len(pred)
    left = [len(p) for p in pred]
    ready = [k for k, c in enumerate(left) if c == 0]
    while ready:
        k = ready.pop()
        for v in succ[k]:
            depth[v] = max(depth[v], depth[k] + 1)
            left[v] -= 1
            if left[v] == 0:
                ready.append(v)
    return depth


def _ancestors(roots: list[int], pred: list[list[int]]) -> list[bool]:
    """Whether each kernel is one of `roots` or feeds one of them."""
    seen = [False] * len(pred)
    stack = list(roots)
    while stack:
        k = stack.pop()
        if not seen[k]:
            seen[k] = True
            stack.extend(pred[k])
    return seen


class _Placer:
    """An order under construction: placing a kernel also places, right after it, every
    kernel outside `live` that it made ready (sinks first, so that a weight update follows
    its last producer directly; then the others, each with what it makes ready)."""

    def __init__(self, pred: list[list[int]], succ: list[list[int]], live: list[bool]):
        self.succ, self.live = succ, live
        self.left = [len(p) for p in pred]
        self.placed = [False] * len(pred)
        self.order: list[int] = []

    def place(self, k: int) -> None:
        stack = [k]
        while stack:
            j = stack.pop()
            if self.placed[j]:
                continue
            self.placed[j] = True
            self.order.append(j)
            ready = []
            for v in self.succ[j]:
                self.left[v] -= 1
                if self.left[v] == 0 and not self.live[v]:
                    ready.append(v)
            # popped in ascending (sinks first, then index) order
            ready.sort(key=lambda v: (bool(self.succ[v]), v), reverse=True)
            stack.extend(ready)


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
