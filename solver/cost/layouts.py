"""Layouts of tensors between TP-sharded kernels: the dim a sharding leaves a kernel's
output split along, the layout a consumer sharding needs, the collective (seconds) that
turns one into the other, and the conversion groups that pay one collective per produced
tensor and target layout (solver.cost.problem.EdgeCost)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from generator.graph import Kernel
from solver.cost.collectives import hierarchical_time
from solver.cost.problem import REPLICATED, EdgeCost, KernelMenu, Span


def rs_dim(kernel: Kernel, tp: int) -> str:
    """Output dim a reduce-scatter leaves the result split along (first large enough)."""
    sizes = kernel.dim_sizes
    for o in kernel.outputs:
        for d in o.dims:
            if sizes[d] >= tp:
                return d
    return ""


def output_layout(kernel: Kernel, sharding: str, tp: int) -> str:
    """The dim the kernel's output is split along under `sharding` ('' = replicated)."""
    if sharding == REPLICATED or tp <= 1:
        return ""
    if sharding.endswith("+rs"):
        return rs_dim(kernel, tp)
    out_dims = {d for o in kernel.outputs for d in o.dims}
    return sharding if sharding in out_dims else ""


def layout_conversion(
    src: Kernel,
    dst: Kernel,
    dst_operand: str,
    dim_map: dict[str, str],
    tensor_bytes: float,
    s_src: str,
    s_dst: str,
    tp: int,
    tp_span: Span,
) -> float:
    """Seconds to turn the producer's output layout into the layout the consumer needs."""
    if tp <= 1:
        return 0.0
    have = output_layout(src, s_src, tp)
    if not have:
        return 0.0  # replicated: every chip slices what it needs
    have_dst = dim_map.get(have, have if not dim_map else "")
    need_split = s_dst.split("+")[0]
    operand_dims = dst.operand(dst_operand).dims
    need = need_split if need_split != REPLICATED and need_split in operand_dims else ""
    if need and need == have_dst:
        return 0.0
    kind = "all_gather" if not need else "all_to_all"
    return hierarchical_time(kind, tensor_bytes, tp_span)


def target_layout(dst: Kernel, dst_operand: str, dim_map: dict[str, str], s_dst: str) -> str:
    """The layout of the producer's output (its split dim, in the producer's dim names; ""
    = whole on every chip) that consumer sharding s_dst needs, as `layout_conversion` reads
    it; a split on a dim the producer lacks is its own layout ("~dst.operand.dim")."""
    need_split = s_dst.split("+")[0]
    operand_dims = dst.operand(dst_operand).dims
    need = need_split if need_split != REPLICATED and need_split in operand_dims else ""
    if not need:
        return ""
    if not dim_map:
        return need
    back = [d for d, v in dim_map.items() if v == need]
    return back[0] if len(back) == 1 else f"~{dst.name}.{dst_operand}.{need}"


def conversion_groups(
    edges: list[EdgeCost], kernels: list[Kernel], menus: Sequence[KernelMenu], raw: list
) -> list[EdgeCost]:
    """Edges that carry the whole output of one producer form a group (one conversion per
    target layout); the first consumer (lowest index) leads."""
    whole: dict[int, list[int]] = {}
    for i, (e, (edge, _)) in enumerate(zip(edges, raw)):
        src = kernels[e.src]
        full = sum(src.operand_bytes(o) for o in src.outputs)
        if edge.tensor_bytes and abs(edge.tensor_bytes - full) <= 1e-9 * full:
            whole.setdefault(e.src, []).append(i)
    out = list(edges)
    for g, (_src, members) in enumerate(sorted(whole.items())):
        if len(members) < 2:
            continue
        ids: dict[str, int] = {}
        lead = min(members, key=lambda i: (edges[i].dst, i))
        for i in members:
            e, (edge, _) = edges[i], raw[i]
            dst = kernels[e.dst]
            dim_map = dict(edge.dim_map)
            layouts = tuple(
                ids.setdefault(target_layout(dst, e.dst_operand, dim_map, s), len(ids))
                for s in menus[e.dst].shardings
            )
            out[i] = replace(e, group=g, layouts=layouts, lead=i == lead)
    return out


def conversion_table(
    src: Kernel,
    dst: Kernel,
    dst_operand: str,
    dim_map: dict[str, str],
    tensor_bytes: float,
    shardings: tuple[tuple[str, ...], tuple[str, ...]],
    tp: int,
    tp_span: Span,
) -> tuple[tuple[float, ...], ...]:
    """conv[a][b]: `layout_conversion` seconds for every producer / consumer sharding,
    with its parts computed once per table: the layout each producer sharding leaves, the
    one each consumer sharding needs, and the (pure) collective time of each kind."""
    if tp <= 1:
        return tuple(tuple(0.0 for _ in shardings[1]) for _ in shardings[0])
    operand_dims = dst.operand(dst_operand).dims
    needs = []
    for b in shardings[1]:
        split = b.split("+")[0]
        needs.append(split if split != REPLICATED and split in operand_dims else "")
    times: dict[str, float] = {}

    def seconds(have: str, need: str) -> float:
        if not have:
            return 0.0  # replicated: every chip slices what it needs
        if need and need == dim_map.get(have, have if not dim_map else ""):
            return 0.0
        kind = "all_gather" if not need else "all_to_all"
        if kind not in times:
            times[kind] = hierarchical_time(kind, tensor_bytes, tp_span)
        return times[kind]

    haves = [output_layout(src, a, tp) for a in shardings[0]]
    return tuple(tuple(seconds(have, need) for need in needs) for have in haves)
