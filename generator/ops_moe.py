"""An MoE layer's token movement: the routed token copies put in expert order (dispatch)
and summed back into token order (combine), fused or as PyTorch's ops (setup.proto
MoePermute).

Fused (Transformer Engine's permute fusion, the engines' expand and finalize kernels): one
kernel each way, priced by its DRAM traffic. Unfused (Megatron-core without permute fusion,
plain PyTorch MoE layers): dispatch is index_select, a gather; combine scales every copy by
its routing probability in a pass of its own (`routed_scale`), then scatter_add_ /
index_add_ sums the copies into a zero-filled token tensor with one 16-bit atomic add per
element, and the gather's gradient (`dispatch_bwd`) is such a scatter-add too: those two
kernels take at least their elements at the chip's atomic-add rate (Kernel.atomic_adds,
solver.cost.kernel_times)."""

from __future__ import annotations

from dataclasses import replace

from generator.builder import Dim, GraphBuilder, Tensor
from generator.graph import Communication, KernelKind
from generator.ops import binary, unary

SHARDABLE = ["tokens", "experts"]


def _atomic(b: GraphBuilder, name: str, adds: float) -> None:
    b.kernels[name] = replace(b.kernels[name], atomic_adds=adds)


def dispatch(
    b: GraphBuilder,
    h: Tensor,
    route: Tensor,
    dims: tuple[Dim, Dim, Dim, Dim, Dim],
    routed: int,
    abpe: float,
    scatter_add: bool,
) -> Tensor:
    """The routed copies of h (T, H) in expert order (E, C, H); `dims` = (T, H, R, E, C),
    R the routing table's expert dim. Under expert parallelism the copies go all-to-all."""
    T, H, R, E, C = dims
    moved = routed * H[1]
    disp = binary(
        b,
        "dispatch",
        [("in", h, (T, H)), ("route", route, (T, R))],
        (E, C, H),
        moved,
        abpe=abpe,
        kind=KernelKind.ROUTER,
        cls="Va_Va",
        shardable=SHARDABLE,
        comm=Communication.ALL_TO_ALL,
        comm_bytes=moved * abpe,
    )
    if scatter_add and h.requires_grad:  # the backward exists once the builder emits it
        b.defer(lambda: _atomic(b, "dispatch_bwd", moved))
    return disp


def combine(
    b: GraphBuilder,
    down: Tensor,
    route: Tensor,
    dims: tuple[Dim, Dim, Dim, Dim, Dim],
    routed: int,
    abpe: float,
    scatter_add: bool,
) -> Tensor:
    """The expert outputs (E, C, H) weighted and summed back to (T, H) (all-to-all back
    under expert parallelism)."""
    T, H, R, E, C = dims
    moved = routed * H[1]
    if scatter_add:
        shard = ["experts", "expert_tokens"]
        down = unary(b, "routed_scale", down, abpe=abpe, flop_per_element=1, shardable=shard)
    out = binary(
        b,
        "combine",
        [("in", down, (E, C, H)), ("route", route, (T, R))],
        (T, H),
        2 * moved,
        abpe=abpe,
        kind=KernelKind.ROUTER,
        cls="Va_Va",
        shardable=SHARDABLE,
        comm=Communication.ALL_TO_ALL,
        comm_bytes=moved * abpe,
    )
    if scatter_add:
        _atomic(b, "combine", moved)
    return out
