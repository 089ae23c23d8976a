"""A kernel's on-chip tilings for one sharding: a GEMM's data-movement frontier points
(solver/cost/frontier.py), a fused attention's tiles, a streamed kernel's row buffer; each
with its buffer bytes, DRAM traffic per operand and output tile (solver/cost/menus.py
turns them into options)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from generator.graph import Kernel, KernelKind, OperandRole, Pass
from schema.tiles import ATTENTION, STREAM, parse_tile, tile_text
from solver.cost import frontier, memo
from solver.cost.attention_tiles import attention_tilings
from solver.cost.gemm_roles import compulsory_bytes, gemm_roles, is_gemm


def tilings(
    kernel: Kernel, sizes: dict[str, int], sram_bytes: float, dataflow: bool, points: int
) -> list[tuple[str, float, dict[str, float], float]]:
    """(tile description, buffer bytes, traffic per operand, output tile bytes)."""
    compulsory = compulsory_bytes(kernel, sizes)
    out_bytes = sum(compulsory[o.name] for o in kernel.outputs)
    pin = parse_tile(kernel.pinned_tile) if kernel.pinned_tile else None
    if not is_gemm(kernel):
        if pin is not None and pin.family not in (STREAM, ATTENTION):
            return []  # a GEMM tile pinned on a streamed kernel: no option (untileable says)
        if kernel.kind == KernelKind.ATTENTION:
            tiles = attention_tilings(kernel, sizes, compulsory, sram_bytes)
            if tiles is not None and pin is not None and pin.family == ATTENTION:
                return [t for t in tiles if t[0] == tile_text(pin)]  # that tile, if it fits
            if tiles is not None:
                # pinned "stream": the largest tile that fits (fewest re-reads)
                return tiles[-1:] if pin is not None else tiles
        if pin is not None and pin.family == ATTENTION:
            return []  # an attention tile pinned on a kernel without one
        # streamed row by row: a row spans the innermost dim (a norm's or softmax's
        # reduction), every outer dim is a loop over rows
        rows = math.prod(sizes[d] for d, _ in kernel.dims[:-1]) if kernel.dims else 1
        tile = out_bytes / max(rows, 1)
        buf = 2 * sum(compulsory.values()) / max(rows, 1)
        return [("stream", min(buf, sram_bytes), compulsory, min(2 * tile, sram_bytes))]
    a, b, c, batch, m, n, k = gemm_roles(kernel)
    bm = math.prod(sizes[d] for d in m)
    bn = math.prod(sizes[d] for d in n)
    bk = math.prod(sizes[d] for d in k)
    ops = {o.name: o for o in kernel.operands}
    elem = max(ops[a].bytes_per_element, ops[b].bytes_per_element, ops[c].bytes_per_element)
    fit = sram_bytes / elem
    if pin is not None:
        point = None
        if pin.family != STREAM:
            point = frontier.tile_point(bm, bk, bn, pin.family, pin.tile_m, pin.tile_n)
        pts = [point] if point is not None and point.buffer <= fit else []
    elif dataflow:
        pts = frontier.fusion_menu(*fusion_args(kernel, sizes, sram_bytes, points))
    else:
        pts = list(frontier.best_fit(bm, bk, bn, fit))  # = menu(..., size=1)[-1:]
    return [
        (t, buf, dict(traffic), out)
        for t, buf, out, traffic in tile_costs(kernel, sizes, sram_bytes, pts)
    ]


def kept_tilings(
    kernel: Kernel, sizes: dict[str, int], sram_bytes: float, dataflow: bool, points: int
) -> list[tuple[str, float, dict[str, float], float]]:
    """`tilings`, kept in memo.TILINGS under every argument (the kernel by value: tilings
    reads only fields equality compares); a fresh list each time (build_menu extends it),
    the tiles themselves shared (nobody writes their traffic dicts)."""
    key = (kernel, tuple(sizes.items()), sram_bytes, dataflow, points)
    tiles = memo.TILINGS.find(key)
    if tiles is None:
        tiles = tuple(tilings(kernel, sizes, sram_bytes, dataflow, points))
        memo.TILINGS.put(key, tiles)
    return list(tiles)


def held_tiles(
    kernel: Kernel, sizes: dict[str, int], sram_bytes: float, instances: int
) -> list[tuple[str, float, dict[str, float], float]]:
    """The tile that keeps a GEMM's whole weight on chip (the resident-panel family whose
    panel is the whole weight: a_resident Tm = M when A is the weight, b_resident Tn = N
    when B is), with the weight read once for the `instances` graph instances that run its
    configuration back to back: 1/instances of it per instance (issue #37: weights that fit
    in SRAM beside the working set are read once per step). Its buffer holds the whole
    weight for the configuration's lifetime; [] when it does not fit or the kernel is not
    a single-weight, unbatched GEMM."""
    if not is_gemm(kernel):
        return []
    a, b, _, batch, m, n, k = gemm_roles(kernel)
    role = {o.name: o.role for o in kernel.operands}
    weight = [x for x in (a, b) if role[x] == OperandRole.WEIGHT]
    if len(weight) != 1 or math.prod(sizes[d] for d in batch) != 1:
        return []
    bm, bk, bn = (math.prod(sizes[d] for d in group) for group in (m, k, n))
    family = "a_resident" if weight[0] == a else "b_resident"
    point = frontier.tile_point(bm, bk, bn, family, bm, bn)
    assert point is not None
    out = []
    for tile, buf, out_tile, traffic in tile_costs(kernel, sizes, sram_bytes, [point]):
        if buf > sram_bytes:
            continue
        per_instance = dict(traffic)
        per_instance[weight[0]] /= instances
        out.append((tile, buf, per_instance, out_tile))
    return out


def tile_costs(
    kernel: Kernel, sizes: dict[str, int], sram_bytes: float, pts: Sequence[frontier.TilePoint]
) -> list[tuple[str, float, float, tuple[tuple[str, float], ...]]]:
    """A GEMM's frontier points (elements, per batch) as (tile, buffer bytes, output tile
    bytes, sorted traffic per operand in bytes over the whole batch); a bias and its
    gradient (epilogue operands) move once, at their compulsory bytes."""
    a, b, c, batch, _, _, _ = gemm_roles(kernel)
    bb = math.prod(sizes[d] for d in batch)
    ops = {o.name: o for o in kernel.operands}
    epilogue = {n: v for n, v in compulsory_bytes(kernel, sizes).items() if n not in (a, b, c)}
    elem = max(ops[a].bytes_per_element, ops[b].bytes_per_element, ops[c].bytes_per_element)
    out = []
    for p in pts:
        traffic = {
            a: p.a_traffic * bb * ops[a].bytes_per_element,
            b: p.b_traffic * bb * ops[b].bytes_per_element,
            c: p.c_traffic * bb * ops[c].bytes_per_element,
        } | epilogue
        out_tile = 2 * p.tile_m * p.tile_n * ops[c].bytes_per_element
        out.append(
            (
                p.describe(),
                p.buffer * elem,
                min(out_tile, sram_bytes),
                tuple(sorted(traffic.items())),
            )
        )
    return out


def fusion_args(kernel: Kernel, sizes: dict[str, int], sram_bytes: float, points: int) -> tuple:
    """frontier.fusion_menu's arguments for a GEMM on per-chip `sizes`: its M, K, N, the
    buffer in elements, and every status each operand can have in a configuration."""
    a, b, c, _, m, n, k = gemm_roles(kernel)
    ops = {o.name: o for o in kernel.operands}
    elem = max(ops[a].bytes_per_element, ops[b].bytes_per_element, ops[c].bytes_per_element)
    fed = {o.name for o in kernel.inputs if o.role != OperandRole.WEIGHT}
    saved = kernel.pass_ != Pass.FWD
    states = {
        x: (frontier.DRAM, frontier.FUSED, frontier.HELD)
        if x in fed and saved
        else (frontier.DRAM, frontier.FUSED)
        if x in fed
        else (frontier.DRAM,)
        for x in (a, b)
    }
    dims = [math.prod(sizes[d] for d in group) for group in (m, k, n)]
    fused_out = (frontier.DRAM, frontier.FUSED)
    return (*dims, sram_bytes / elem, points, states[a], states[b], fused_out)
