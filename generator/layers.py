"""Repeated layers in one graph, found from its structure alone: graph algorithms on nodes
numbered 0..n-1 and edges given as index pairs, knowing nothing of kernels.

A whole model in one graph joins its layers by lone edges: removing one (a bridge of the
undirected graph) splits the graph in two. Cut at the bridges that leave at least
MIN_SIDE kernels on each side (`wide_bridges`), the graph falls into blocks (`components`),
each at a level: the longest chain of bridges from a source block (`block_levels`).
KernelGraph.canonical_order (generator.graph) runs the blocks by level and orders each
block by signatures of the block alone, so identical layers come out in identical orders.
Nothing here depends on names or declaration order."""

from __future__ import annotations

from collections.abc import Sequence

MIN_SIDE = 8  # kernels on each side of a bridge that separates layers


def bridge_indices(num_nodes: int, pairs: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the `pairs` (edges, either direction) that are bridges of the undirected
    multigraph: Tarjan's low-link, iterative (a graph of thousands of kernels is deeper
    than Python's recursion limit); parallel edges are never bridges."""
    adj: list[list[tuple[int, int]]] = [[] for _ in range(num_nodes)]
    for i, (a, b) in enumerate(pairs):
        adj[a].append((b, i))
        adj[b].append((a, i))
    disc, low = [-1] * num_nodes, [0] * num_nodes
    found: list[int] = []
    clock = 0
    for root in range(num_nodes):
        if disc[root] >= 0:
            continue
        disc[root] = low[root] = clock
        clock += 1
        stack = [(root, -1, iter(adj[root]))]
        while stack:
            node, via, it = stack[-1]
            step = next(it, None)
            if step is None:
                stack.pop()
                if stack:
                    parent = stack[-1][0]
                    low[parent] = min(low[parent], low[node])
                    if low[node] > disc[parent]:
                        found.append(via)
                continue
            other, edge = step
            if edge == via:
                continue
            if disc[other] < 0:
                disc[other] = low[other] = clock
                clock += 1
                stack.append((other, edge, iter(adj[other])))
            else:
                low[node] = min(low[node], disc[other])
    return sorted(found)


def components(num_nodes: int, pairs: Sequence[tuple[int, int]], removed: set[int]) -> list[int]:
    """Component id of every node once the pairs in `removed` are taken out (ids by first
    node)."""
    parent = list(range(num_nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, (a, b) in enumerate(pairs):
        if i not in removed:
            parent[find(a)] = find(b)
    ids: dict[int, int] = {}
    return [ids.setdefault(find(k), len(ids)) for k in range(num_nodes)]


def wide_bridges(num_nodes: int, pairs: Sequence[tuple[int, int]], min_side: int) -> set[int]:
    """The bridges with at least `min_side` nodes on each side (side sizes from the tree
    the bridges make of the components between them)."""
    cand = set(bridge_indices(num_nodes, pairs))
    if not cand:
        return set()
    comp = components(num_nodes, pairs, cand)
    size = [0] * (max(comp) + 1)
    for c in comp:
        size[c] += 1
    links: list[list[int]] = [[] for _ in size]
    for i in cand:
        a, b = comp[pairs[i][0]], comp[pairs[i][1]]
        links[a].append(i)
        links[b].append(i)
    keep: set[int] = set()
    seen = [False] * len(size)
    for start in range(len(size)):  # one tree per connected part of the graph
        if seen[start]:
            continue
        order, up, queue = [], {start: -1}, [start]
        seen[start] = True
        while queue:
            c = queue.pop()
            order.append(c)
            for i in links[c]:
                other = comp[pairs[i][0]] + comp[pairs[i][1]] - c
                if not seen[other]:
                    seen[other] = True
                    up[other] = i
                    queue.append(other)
        below = {c: size[c] for c in order}
        total = sum(below.values())
        for c in reversed(order):
            i = up[c]
            if i < 0:
                continue
            parent = comp[pairs[i][0]] + comp[pairs[i][1]] - c
            below[parent] += below[c]
            if min_side <= below[c] <= total - min_side:
                keep.add(i)
    return keep


def block_levels(
    count: int, block: Sequence[int], pairs: Sequence[tuple[int, int]], cut: set[int]
) -> list[int]:
    """Level of each of the `count` blocks (`block`: node -> block id) joined by the bridges
    in `cut`: the longest chain of bridges into a block (bridges point from producer), over
    the blocks in a topological order (Kahn)."""
    succ: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(cut):
        succ[block[pairs[i][0]]].append(block[pairs[i][1]])
    return longest_paths(succ)


def longest_paths(succ: Sequence[Sequence[int]]) -> list[int]:
    """Per node of a DAG (`succ`: each node's successors, repeats allowed), the most edges
    on a path into it from a node without predecessors (Kahn)."""
    indeg = [0] * len(succ)
    for out in succ:
        for b in out:
            indeg[b] += 1
    level = [0] * len(succ)
    ready = [b for b, d in enumerate(indeg) if d == 0]
    while ready:
        a = ready.pop()
        for b in succ[a]:
            level[b] = max(level[b], level[a] + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return level
