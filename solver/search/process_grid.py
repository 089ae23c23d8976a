"""HPL's process grid on the topology: which chips form a process row (group "hpl_row",
the panel broadcast) and a process column ("hpl_col": pivoting and the row swap), as spans
of topology levels, so their collectives take the one collective cost function
(solver.cost.collectives.hierarchical_time) per level of the hierarchy: a row inside a node
runs on NVLink, a row across nodes on the network.

Generated HPL (generator/hpl.py): a P x Q grid with row-major ranks (HPL's default PMAP):
process (r, c) is rank r Q + c, so a row is Q consecutive ranks, the innermost chips, and a
column strides over the levels above.
DFModel's HPL branch (`execution { hpl {...} }`): its grid X x Y is the topology's (one
level: 1 x x; two: x x y; three: xy x z) with the broadcast on the Y level(s) and the
point-to-point row swap on the X level(s) (fengqian-ayce/DFModel src/intra_chip.py, its hpl
branch): a column is the inner X chips, i.e. column-major ranks. Its kernels'
communication_size is a whole panel; natively a process broadcasts its 1/X share along its
row and swaps its 1/Y share down its column (`dfmodel_hpl_graph`), as DFModel divides.

A group that straddles a level boundary without dividing it (a row of 12 on 8-chip nodes)
spans the distinct positions its members take on each level: priced over the whole levels
it touches, a slight overestimate.
"""

from __future__ import annotations

from dataclasses import replace

from generator.graph import Communication, KernelGraph
from generator.hpl import COLUMN, ROW
from hardware.system import NetworkLevel
from solver.cost.problem import Span


def grid_spans(
    levels: tuple[NetworkLevel, ...], p: int, q: int, row_major: bool = True
) -> dict[str, Span]:
    """Spans of a process row (q processes) and a process column (p) of a P x Q grid laid
    on `levels` (innermost first, degrees set), ranks row-major or column-major."""

    def rank(r: int, c: int) -> int:
        return r * q + c if row_major else c * p + r

    return {
        ROW: _span(levels, [rank(0, c) for c in range(q)]),
        COLUMN: _span(levels, [rank(r, 0) for r in range(p)]),
    }


def _span(levels: tuple[NetworkLevel, ...], ranks: list[int]) -> Span:
    """The levels on which the chips of `ranks` differ, each with how many positions they
    take there (a rank's position on level i is its i-th digit, innermost first)."""
    span = []
    stride = 1
    for lv in levels:
        degree = max(lv.degree, 1)
        positions = {(r // stride) % degree for r in ranks}
        if len(positions) > 1:
            span.append((lv, len(positions)))
        stride *= degree
    return tuple(span)


def dfmodel_grid(levels: tuple[NetworkLevel, ...]) -> tuple[int, int]:
    """DFModel's HPL grid (X, Y) of the topology levels (module docstring)."""
    degrees = [max(lv.degree, 1) for lv in levels]
    if len(degrees) <= 1:
        return 1, (degrees[0] if degrees else 1)
    if len(degrees) == 2:
        return degrees[0], degrees[1]
    return degrees[0] * degrees[1], degrees[-1]


def dfmodel_hpl_graph(graph: KernelGraph, x: int, y: int) -> KernelGraph:
    """DFModel's HPL graph as the native model reads it: a BROADCAST of a whole panel is
    one process's 1/X share along its process row, the second collective (the row swap)
    its 1/Y share down its process column."""
    kernels = []
    for k in graph.kernels:
        if k.communication == Communication.BROADCAST:
            k = replace(k, communication_bytes=k.communication_bytes / x, communication_group=ROW)
        if k.communication_2 != Communication.NONE:
            k = replace(
                k, communication_2_bytes=k.communication_2_bytes / y, communication_2_group=COLUMN
            )
        kernels.append(k)
    return replace(graph, kernels=tuple(kernels))
