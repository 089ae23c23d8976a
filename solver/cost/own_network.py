"""The collectives a kernel needs by itself, whatever its neighbours do: the reduction of a
split reduction dim over the TP group, and the kernel's own communication (an expert
all-to-all, DFModel's FFT transpose, HPL's broadcast and row swap) over its group (the second
collective over its own group when the kernel names one: HPL's row swap down the process
column, its broadcast along the row)."""

from __future__ import annotations

import math

from generator.graph import Communication, Kernel, KernelKind
from solver.cost.collectives import bytes_sent_per_chip, hierarchical_time
from solver.cost.problem import REPLICATED, Span


def own_network(
    kernel: Kernel,
    sharding: str,
    tp: int,
    tp_span: Span,
    group_spans: dict[str, Span],
    out_bytes_full: float,
) -> tuple[float, float, str]:
    """Collectives the kernel needs by itself: a split reduction dim, and its implied
    communication (all-to-all of expert dispatch, ...). Periodic DP gradient reductions are
    charged once per step by the assembly, not here."""
    time_s, sent, labels = 0.0, 0.0, []
    split = sharding.split("+")[0]
    reduces = tp > 1 and split != REPLICATED and split in kernel.reduction_dims
    if reduces and not exchanged_over_tp(kernel, tp_span, group_spans):
        kind = "reduce_scatter" if sharding.endswith("+rs") else "all_reduce"
        time_s += hierarchical_time(kind, out_bytes_full, tp_span)
        sent += bytes_sent_per_chip(kind, out_bytes_full, tp)
        labels.append(f"{kind} {out_bytes_full / 1e6:.3g} MB over tp")
    first = kernel.communication_group or "tp"
    second = kernel.communication_2_group or first
    for comm, size, group in (
        (kernel.communication, kernel.communication_bytes, first),
        (kernel.communication_2, kernel.communication_2_bytes, second),
    ):
        span = group_spans.get(group, ())
        p = math.prod(q for _, q in span) if span else 1
        if comm in (Communication.NONE, Communication.ALL_REDUCE_PERIODIC) or p <= 1:
            continue
        if kernel.kind == KernelKind.ROUTER:
            size = expert_exchange_bytes(kernel, sharding, tp, size) * p
            size *= wire_share(kernel.dedup_experts, kernel.dedup_top_k, p)
        kind = COLLECTIVE_KIND[comm]
        time_s += hierarchical_time(kind, size, span)
        sent += bytes_sent_per_chip(kind, size, p)
        labels.append(f"{kind} {size / 1e6:.3g} MB over {group}")
    return time_s, sent, "; ".join(labels)


def exchanged_over_tp(kernel: Kernel, tp_span: Span, group_spans: dict[str, Span]) -> bool:
    """An MoE dispatch or combine whose all-to-all group holds the TP chips (EP folded over
    TP, solver.search.expert_group): the chips' shares of the split dim (their tokens, their
    experts' results) go to their owners by that all-to-all, not summed over TP."""
    if kernel.kind != KernelKind.ROUTER or kernel.communication != Communication.ALL_TO_ALL:
        return False
    group = {lv.name for lv, _ in group_spans.get(kernel.communication_group, ())}
    return bool(tp_span) and all(lv.name in group for lv, q in tp_span if q > 1)


def wire_share(experts: int, top_k: int, chips: int) -> float:
    """The share of a token's routed copies that cross to other chips when it is sent once
    per destination chip (DeepEP), not once per expert: the expected distinct chips its top_k
    distinct experts fall on, uniformly routed over `chips` chips of experts / chips experts
    each, over top_k; 1 when not deduplicated (experts 0) or the experts do not split evenly.
    A chip is missed with probability C(E - e, k) / C(E, k) (e its experts)."""
    if experts <= 0 or top_k <= 1 or chips <= 1 or experts % chips:
        return 1.0
    per_chip = experts // chips
    missed = math.comb(experts - per_chip, top_k) / math.comb(experts, top_k)
    return chips * (1.0 - missed) / top_k


def expert_exchange_bytes(kernel: Kernel, sharding: str, tp: int, graph_bytes: float) -> float:
    """The routed-token bytes one chip sends its EP peers. An MoE dispatch or combine (a
    ROUTER kernel, generator.llm_layer.Layer.moe) gives the bytes of its graph's routed
    tokens, not the group's as other all-to-alls do (DLRM, FFT): the graph's, times the share of
    the kernel the chip runs under `sharding` (its tokens or its experts; all of them when
    the kernel runs whole on every TP chip). The all-to-all's size is this times the group
    (solver.cost.collectives' convention), over the EP group the outer choice places
    (solver.search.expert_group)."""
    split = sharding.split("+")[0]
    sizes = kernel.dim_sizes
    if tp <= 1 or split == REPLICATED or split not in sizes:
        return graph_bytes
    return graph_bytes * math.ceil(sizes[split] / tp) / sizes[split]


COLLECTIVE_KIND = {
    Communication.ALL_REDUCE: "all_reduce",
    Communication.ALL_TO_ALL: "all_to_all",
    Communication.ALL_GATHER: "all_gather",
    Communication.REDUCE_SCATTER: "reduce_scatter",
    Communication.POINT_TO_POINT: "p2p",
    Communication.BROADCAST: "broadcast",
}
