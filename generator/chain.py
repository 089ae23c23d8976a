"""Several instances of a repeated graph as one graph, chained as a training step runs them.

A generated layer carries its `boundary` edges (generator.graph.KernelGraph): the layer's
output into the next layer's first reader of its input, and the input gradient into the
previous layer's first reader of its output gradient. Chaining `copies` instances turns
those into ordinary edges: a forward boundary goes from copy i to copy i + 1, a backward
one (its producer is a BWD kernel) from copy i + 1 to copy i, so the backward of the last
layer feeds the backward of the one before it. A forward boundary into kernel K also feeds
K's recomputation `K_recompute` in the next copy (generator.builder.recompute's name): the
checkpoint a recomputed layer reads is the previous layer's output, so every forward runs
before the backward that needs it. The chained graph keeps as its own boundary
the edges from its last copy to the next instance's first (forward) and from its first copy
to the previous instance's last (backward). Fusion and layouts may then cross layers.
"""

from __future__ import annotations

from dataclasses import replace

from generator.graph import Edge, KernelGraph, Pass

RECOMPUTE_SUFFIX = "_recompute"  # generator.builder.recompute names its copies so


def copy_name(copy: int, name: str) -> str:
    """The name of kernel `name` in instance `copy` (0 = the first layer)."""
    return f"L{copy}_{name}"


def chain_instances(graph: KernelGraph, copies: int) -> KernelGraph:
    """`copies` instances of `graph` in one graph (see the module docstring)."""
    if copies < 1:
        raise ValueError(f"copies must be at least 1, got {copies}")
    if copies == 1:
        return graph
    backward = {k.name for k in graph.kernels if k.pass_ == Pass.BWD}
    kernels = tuple(
        replace(k, name=copy_name(i, k.name)) for i in range(copies) for k in graph.kernels
    )
    edges = [_renamed(e, i, i) for i in range(copies) for e in graph.edges]
    names = {k.name for k in graph.kernels}
    for e in graph.boundary:
        for i in range(copies - 1):
            src, dst = (i + 1, i) if e.src in backward else (i, i + 1)
            edges.append(_renamed(e, src, dst))
            twin = f"{e.dst}{RECOMPUTE_SUFFIX}"
            if e.src not in backward and twin in names:
                edges.append(_renamed(replace(e, dst=twin), i, i + 1))
    last = copies - 1
    boundary = tuple(
        _renamed(e, 0, last) if e.src in backward else _renamed(e, last, 0) for e in graph.boundary
    )
    return KernelGraph(graph.name, kernels, tuple(edges), boundary)


def _renamed(edge: Edge, src_copy: int, dst_copy: int) -> Edge:
    return replace(edge, src=copy_name(src_copy, edge.src), dst=copy_name(dst_copy, edge.dst))
