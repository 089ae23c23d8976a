"""The order a search over one kernel order follows: a topological order that does not depend
on how the input numbers or names its kernels (structural signatures, Weisfeiler-Lehman), and
that runs repeated layers layer by layer (generator.layers finds them), so the problem's
order is periodic (solver.fusion.period)."""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

from generator.layers import MIN_SIDE, block_levels, components, wide_bridges

if TYPE_CHECKING:
    from generator.graph import Edge, Kernel


def canonical_order(
    kernels: Sequence[Kernel], edges: Sequence[Edge], boundary: Sequence[Edge] = ()
) -> tuple[str, ...]:
    """KernelGraph.canonical_order: see its docstring."""
    layers = layer_levels(kernels, edges)
    level, sig = (
        layers if layers is not None else ({}, structural_signatures(kernels, edges, boundary))
    )
    index = {k.name: i for i, k in enumerate(kernels)}
    deg = {k.name: 0 for k in kernels}
    succ: dict[str, list[str]] = {k.name: [] for k in kernels}
    for e in edges:
        deg[e.dst] += 1
        succ[e.src].append(e.dst)

    def key(name: str) -> tuple[str, int]:
        return (sig[name], index[name])

    # depth first (a branch is finished before the next starts: fusion-friendly), one
    # stack per level (a single one without repeated layers)
    stacks: dict[int, list[str]] = {}
    live: list[int] = []  # heap of the levels whose stack holds a kernel

    def push(name: str) -> None:
        stack = stacks.setdefault(level.get(name, 0), [])
        if not stack:
            heapq.heappush(live, level.get(name, 0))
        stack.append(name)

    for n in sorted((n for n, d in deg.items() if d == 0), key=key, reverse=True):
        push(n)
    order: list[str] = []
    current = -1
    while live:
        if live[0] != current:
            current = live[0]
            stacks[current].sort(key=key, reverse=True)
        name = stacks[current].pop()
        if not stacks[current]:
            heapq.heappop(live)
        order.append(name)
        new = []
        for m in succ[name]:
            deg[m] -= 1
            if deg[m] == 0:
                new.append(m)
        for m in sorted(new, key=key, reverse=True):
            push(m)
    return tuple(order)


def structural_signatures(
    kernels: Sequence[Kernel], edges: Sequence[Edge], boundary: Sequence[Edge] = (), rounds: int = 4
) -> dict[str, str]:
    """kernel name -> a digest of its content (every field but its name) refined `rounds`
    times by its producers' and consumers' digests along the edges (Weisfeiler-Lehman):
    equal for kernels the graph cannot tell apart, whatever their names or order."""
    sig = {k.name: _digest(unpinned_text(k)) for k in kernels}
    # a boundary tensor by its first reader only: its other readers are ordered by the
    # edges inside the graph, and the signatures (so the order) stay those of a graph that
    # carried the tensor to one reader
    first: dict[tuple[str, str], Edge] = {}
    for e in boundary:
        first.setdefault((e.src, e.src_operand), e)
    tagged = [("e", e) for e in edges] + [("b", e) for e in first.values()]
    for _ in range(rounds):
        around: dict[str, list[str]] = {k.name: [] for k in kernels}
        for tag, e in tagged:
            what = repr((e.dst_operand, e.src_operand, e.dim_map, e.tensor_bytes))
            around[e.dst].append(f"{tag}<{sig[e.src]}{what}")
            around[e.src].append(f"{tag}>{sig[e.dst]}{what}")
        sig = {name: _digest(sig[name] + "".join(sorted(around[name]))) for name in sig}
    return sig


def unpinned_text(kernel: Kernel) -> str:
    """The repr of the kernel as the order sees it: no name, no user's pin (a pin is not the
    kernel), i.e. `repr(replace(kernel, name="", pinned_sharding=<the order's sharding>,
    pinned_config=-1, pinned_tile=""))`, written field by field as the dataclass repr is:
    building that copy (the frozen dataclass's __init__ setting every field) cost 1 of a
    20,000-kernel run's 19 CPU-s."""
    sharding = kernel.pinned_sharding if kernel.order_sharding is None else kernel.order_sharding
    unpinned = {"name": "", "pinned_sharding": sharding, "pinned_config": -1, "pinned_tile": ""}
    names = _repr_fields(type(kernel))
    parts = [f"{n}={unpinned[n] if n in unpinned else getattr(kernel, n)!r}" for n in names]
    return f"{type(kernel).__qualname__}({', '.join(parts)})"


def _repr_fields(cls: type) -> tuple[str, ...]:
    kept = _REPR_FIELDS.get(cls)
    if kept is None:
        kept = _REPR_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.repr)
    return kept


_REPR_FIELDS: dict[type, tuple[str, ...]] = {}


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def layer_levels(
    kernels: Sequence[Kernel], edges: Sequence[Edge]
) -> tuple[dict[str, int], dict[str, str]] | None:
    """(kernel -> level, kernel -> signature within its block) when the graph repeats a
    layer: at least two blocks between wide bridges (generator.layers) look alike (same
    signatures); None otherwise (the order then stays the plain depth-first one)."""
    names = [k.name for k in kernels]
    index = {name: i for i, name in enumerate(names)}
    pairs = [(index[e.src], index[e.dst]) for e in edges]
    cut = wide_bridges(len(names), pairs, MIN_SIDE)
    if not cut:
        return None
    block = components(len(names), pairs, cut)
    count = max(block) + 1
    sig: dict[str, str] = {}
    looks: list[tuple[str, ...]] = []
    members: list[list[Kernel]] = [[] for _ in range(count)]
    for k in kernels:
        members[block[index[k.name]]].append(k)
    inside: list[list[Edge]] = [[] for _ in range(count)]
    for i, e in enumerate(edges):
        if i not in cut:
            inside[block[pairs[i][0]]].append(e)
    for b in range(count):
        local = structural_signatures(members[b], inside[b])
        sig.update(local)
        looks.append(tuple(sorted(local.values())))
    if len(set(looks)) == len(looks):
        return None  # no two blocks alike: not repeated layers
    level = block_levels(count, block, pairs, cut)
    return {name: level[block[index[name]]] for name in names}, sig
