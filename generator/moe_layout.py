"""How an MoE layer's kernels split over the tensor-parallel group, for the two expert
layouts Megatron-core runs (its --expert-tensor-parallel-size, ETP):

- ETP = TP (`fold` False, Megatron's default): the experts' FFN splits over the TP group like
  the dense MLP (the expert GEMMs on `ffn`, the down projection's partial sums all-reduced);
  token permutation, dispatch and combine run whole on every TP chip, each chip exchanging
  all the graph's routed tokens with its EP peers in the other TP groups.
- ETP = 1 (`fold` True, the fine-grained MoE recipes): each chip holds whole experts and the
  EP group folds over the TP chips: every kernel of the expert block splits the `experts`
  dim over TP, the permutation on the chip's own `tokens` (its sequence-parallel share). The
  dispatch (tokens in, experts out) and the combine backward stay on `tokens`; their output
  is each chip's received tokens, so the expert kernels read it without a layout change.
  Every chip then sends its share of the routed tokens to the whole EP group: the TP chips
  and the EP ranks beyond them (solver.search.expert_group, solver.cost.own_network).

The split is pinned: letting the solver split the experts over TP in the ETP = TP layout
would run the fold without paying its all-to-all over the TP chips (the layout search is the
outer search's ETP degree, solver.search.degrees)."""

from __future__ import annotations

from dataclasses import replace

from generator.graph import Kernel, KernelGraph, OperandRole
from generator.models import ModelConfig
from schema import setup_pb2

# the kernels of the expert block (generator.llm_layer.Layer.moe, its backward and FP8 casts)
MOE_KERNELS = ("dispatch", "combine", "expert_")
# the whole MoE block of a layer (Megatron-core's MoELayer): the router and its top-k, the
# expert block, the routing-weight scale and the shared experts with their sum
MOE_BLOCK = ("router", "topk", "routed_scale", *MOE_KERNELS, "shared_", "moe_sum")


def in_moe_block(name: str) -> bool:
    """Whether kernel `name` belongs to a layer's MoE block (any pass)."""
    return name.startswith(MOE_BLOCK)


# LlmTraining.moe_dispatcher -> Workload.moe_dispatcher
MOE_DISPATCHERS = {
    setup_pb2.MOE_DISPATCHER_ALLTOALL: "alltoall",
    setup_pb2.MOE_DISPATCHER_DEEPEP: "deepep",
}


def expert_layouts(
    req: setup_pb2.LlmTraining, cfg: ModelConfig, num_chips: int
) -> tuple[tuple[int, bool], ...]:
    """(EP TP groups, fold) of each expert layout the outer search tries; the graphs hold
    one TP group's experts, experts / (EP TP groups). The EP degree given (Megatron's, the
    chips of one EP group) is that many TP groups unfolded, EP / TP folded over a TP degree
    the search picks (solver.search.degrees.serves keeps the pairs that multiply to it);
    searched (0), every divisor of the expert count that divides the chips left by CP (EP
    ranks are carved from the data-parallel ranks: TP x CP x EP x DP x PP = chips). The
    fold: both when expert_tensor_parallel is 0, else the one it names."""
    if cfg.experts <= 1 or req.expert_parallel == 1:
        return ((max(req.expert_parallel, 1), False),)  # no EP: the FFN splits over TP
    etp = req.expert_tensor_parallel
    folds = (False, True) if etp == 0 else (etp == 1,)
    cp = max(req.context_parallel, 1)
    ranks = num_chips // cp if num_chips % cp == 0 else 1
    out: list[tuple[int, bool]] = []
    for fold in folds:
        if req.expert_parallel > 0 and not fold:
            groups: list[int] = [req.expert_parallel]
        else:
            size = req.expert_parallel or cfg.experts
            groups = [g for g in range(1, size + 1) if size % g == 0]
        out += [(g, fold) for g in groups if ranks % g == 0]
    return tuple(out)


def sorts_chunks(req: setup_pb2.LlmTraining, cfg: ModelConfig, ep: int, fold: bool) -> bool:
    """Whether the graph sorts the received chunks by local expert (the NCCL all-to-all
    dispatcher with an all-to-all and more than one expert per graph)."""
    exchanges = ep > 1 or fold
    many = cfg.experts // max(ep, 1) > 1
    return req.moe_dispatcher == setup_pb2.MOE_DISPATCHER_ALLTOALL and exchanges and many


def expert_note(experts: int, ep: int, fold: bool, dispatcher: str) -> str:
    """The report's line on the expert layout."""
    if fold:
        where = (
            f"EP folded over the TP chips (expert_tensor_parallel 1): each TP group holds "
            f"{experts // ep} of the {experts} experts, each chip whole experts"
        )
    else:
        where = f"expert parallel {ep}: {experts // ep} of the {experts} experts per TP group"
    how = "DeepEP-style kernels" if dispatcher == "deepep" else "NCCL all-to-all"
    return f"{where}; the routed tokens exchanged by {how} (dispatch, combine)"


def expert_sharding(kernel: Kernel, fold: bool) -> str:
    """The pinned sharding of one kernel of the expert block ("" for any other kernel)."""
    if not kernel.name.startswith(MOE_KERNELS):
        return ""
    dims = {d for d, _ in kernel.dims}
    if not fold:
        return "ffn" if "ffn" in dims else "none"
    if "experts" not in dims:
        return "none"
    # the data it permutes (the routing table, whose dim is every expert, aside)
    ins = [o for o in kernel.operands if o.role == OperandRole.INPUT and o.name != "route"]
    reads_experts = any("experts" in o.dims for o in ins)
    reads_tokens = any("tokens" in o.dims for o in ins)
    return "tokens" if reads_tokens and not reads_experts else "experts"


def pin_expert_layout(graph: KernelGraph, fold: bool) -> KernelGraph:
    """The graph with its expert block's sharding pinned for the layout (module docstring)."""
    kernels = []
    for k in graph.kernels:
        pin = expert_sharding(k, fold)
        if pin:
            # the pin is the split (a kernel kept whole without sequence parallelism still
            # takes its share of the tokens, as the dispatcher does)
            dims = k.shardable_dims
            if dims and pin != "none" and pin not in dims:
                dims = (*dims, pin)
            k = replace(k, pinned_sharding=pin, shardable_dims=dims)
        kernels.append(k)
    return replace(graph, kernels=tuple(kernels))
