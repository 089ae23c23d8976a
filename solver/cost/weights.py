"""How a mapping stores weights and pays for replicating them (WeightRule)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.graph import Kernel, OperandRole, Pass
from solver.cost.collectives import bytes_sent_per_chip, hierarchical_time
from solver.cost.problem import REPLICATED, KernelMenu, MappingProblem, Span


@dataclass(frozen=True)
class WeightRule:
    """Weights as the mapping stores them (DESIGN.md, honesty rules).

    Storage: every kernel that reads a weight (forward, recompute, backward) needs its
    share of it on every chip: 1/TP of it (ceil of the split dim) when the kernel's
    sharding splits a dim of the weight, the whole weight otherwise. A weight is stored
    once, as large as its most demanding reader needs (the MILP row is a max over its
    readers): a forward pass split on heads whose backward pass is split on tokens stores
    the whole weight. Readers of one weight are the kernels whose names differ only by the
    `_recompute` / `_bwd` suffix of the generators (`weight_id`).
    `bytes_per_param`: resident DRAM bytes per stored parameter (weights, and in training
    gradients and optimizer state, each divided by DP at its ZeRO stage).
    Training: a replicated weight's gradient is synchronised over the TP group once per
    step (`grad_bytes_per_param` bytes per parameter): all-gathered when a WGRAD kernel of
    the graph computes it (`reduced_gradients`: that kernel's own sharding pays the reduction
    of partial sums, a reduce-scatter or an all-reduce once per step,
    `per_step_gradient_reduction`; reduce-scatter + all-gather = all-reduce, Megatron's
    sequence-parallel LayerNorm weights), all-reduced otherwise. The step assembly runs a
    graph instance (m + (pp-1)/v) times per step, so the option's network time carries
    `sync_weight` = 1 / (m + (pp-1)/v) of it and the step pays it exactly once. The
    optimizer update of every stored copy is the step's (assemble.training_times), seen by
    the search through solver.search.dram_split."""

    bytes_per_param: float
    grad_bytes_per_param: float = 0.0  # 0: no gradient (inference)
    sync_weight: float = 0.0


WEIGHT_READER_SUFFIXES = ("_recompute", "_bwd")
# generators name a weight's gradient kernel after its forward kernel (generator/ops.py,
# dfmodel_gpt.py: `<name>_weight_update`, `<name>_bwd_weight_update`)
GRADIENT_SUFFIX = "_weight_update"


def weight_owner(name: str) -> str:
    """The forward kernel whose weights a reader (or gradient kernel) named `name` uses."""
    owner = name.removesuffix(GRADIENT_SUFFIX)
    for suffix in WEIGHT_READER_SUFFIXES:
        owner = owner.removesuffix(suffix)
    return owner


def weight_id(kernel: Kernel, operand: str) -> str:
    """The identity of a weight operand across the kernels that read it (WeightRule)."""
    return f"{weight_owner(kernel.name)}/{operand}"


def reduced_gradients(kernels: tuple[Kernel, ...] | list[Kernel]) -> frozenset[tuple[str, int]]:
    """(forward kernel, parameters) of every weight gradient a WGRAD kernel of the graph
    computes: its own menu pays the reduction of partial sums over the TP group."""
    return frozenset(
        (weight_owner(k.name), k.operand_elements(o))
        for k in kernels
        if k.pass_ == Pass.WGRAD
        for o in k.outputs
    )


def gathered_weights(kernel: Kernel, reduced: frozenset[tuple[str, int]]) -> frozenset[str]:
    """The kernel's WEIGHT operands whose gradient a WGRAD kernel computes (matched by owner
    and size; `reduced_gradients`): their replicas all-gather it (WeightRule)."""
    owner = weight_owner(kernel.name)
    return frozenset(
        o.name
        for o in kernel.operands
        if o.role == OperandRole.WEIGHT and (owner, kernel.operand_elements(o)) in reduced
    )


def replica_sync(
    kernel: Kernel,
    replicated: tuple[tuple[str, float], ...],
    gathered: frozenset[str],
    rule: WeightRule,
    tp_span: Span,
) -> tuple[float, float, str]:
    """(seconds, bytes sent per chip, label) of the once-per-step gradient sync of a
    forward kernel's replicated weights (`replicated`: (operand, parameters)): an
    all-gather of those in `gathered`, an all-reduce of the others (WeightRule)."""
    tp = math.prod(p for _, p in tp_span)
    time_s, sent, labels = 0.0, 0.0, []
    for kind in ("all_gather", "all_reduce"):
        params = sum(e for name, e in replicated if (name in gathered) == (kind == "all_gather"))
        grad = params * rule.grad_bytes_per_param
        if grad > 0 and kernel.pass_ == Pass.FWD:
            time_s += hierarchical_time(kind, grad, tp_span)
            sent += bytes_sent_per_chip(kind, grad, tp)
            labels.append(f"grad {kind} {grad / 1e6:.3g} MB over tp per step")
    return time_s, sent, "; ".join(labels)


def weight_storage(
    kernel: Kernel, sharding: str, tp: int
) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
    """((weight, parameters needed per chip), ...) of the kernel's WEIGHT operands under
    `sharding`, and ((operand, parameters), ...) of those it replicates over the TP group
    (WeightRule)."""
    sizes = kernel.dim_sizes
    split = sharding.split("+")[0]
    needs: list[tuple[str, float]] = []
    replicated: list[tuple[str, float]] = []
    for op in kernel.operands:
        if op.role != OperandRole.WEIGHT:
            continue
        elems = float(kernel.operand_elements(op))
        if tp > 1 and split != REPLICATED and split in op.dims:
            needs.append(
                (weight_id(kernel, op.name), elems / sizes[split] * math.ceil(sizes[split] / tp))
            )
        else:
            needs.append((weight_id(kernel, op.name), elems))
            if tp > 1:
                replicated.append((op.name, elems))
    return tuple(needs), tuple(replicated)


def least_stored(problem: MappingProblem) -> float:
    """Parameters per graph instance the weights take at least: each weight as large as
    the least any of its readers can need (a lower bound: one kernel's weights share its
    sharding)."""
    least: dict[str, float] = {}
    for menu in problem.kernels:
        need: dict[str, float] = {}
        for opt in menu.options:
            for w, elems in opt.weights:
                need[w] = min(need.get(w, math.inf), elems)
        for w, elems in need.items():
            least[w] = max(least.get(w, 0.0), elems)
    return sum(least.values())


def stored_params(problem: MappingProblem, choice: tuple[int, ...]) -> float:
    """Parameters per graph instance the chosen options store (each weight as large as
    its most demanding reader needs)."""
    stored: dict[str, float] = {}
    for menu, o in zip(problem.kernels, choice):
        if o < 0:
            continue
        for w, elems in menu.options[o].weights:
            stored[w] = max(stored.get(w, 0.0), elems)
    return sum(stored.values())


def per_step_gradient_reduction(
    kernel: Kernel, menu: KernelMenu, tp: int, tp_span: Span, micro_batches: int
) -> KernelMenu:
    """A weight-gradient kernel split over TP on a reduction dim (tokens: the sequence-
    parallel LayerNorm gradient) produces partial gradients that accumulate locally over the
    step's micro-batches and are all-reduced once per step (Megatron-LM reduces them after
    the last micro-batch; reduce-scattered, for a "+rs" sharding): each of the
    `micro_batches` instances pays 1/micro_batches of the collective that `own_network`
    charged it in full."""
    if kernel.pass_ != Pass.WGRAD or tp <= 1 or micro_batches <= 1:
        return menu
    out_bytes_full = sum(kernel.operand_bytes(o) for o in kernel.outputs)
    keep = 1.0 / micro_batches
    options = []
    for o in menu.options:
        split = o.sharding.split("+")[0]
        if split != REPLICATED and split in kernel.reduction_dims:
            # the same collective `own_network` charged: reduce-scatter or all-reduce
            kind = "reduce_scatter" if o.sharding.endswith("+rs") else "all_reduce"
            full_t = hierarchical_time(kind, out_bytes_full, tp_span)
            full_b = bytes_sent_per_chip(kind, out_bytes_full, tp)
            o = replace(
                o,
                network_s=max(o.network_s - full_t * (1 - keep), 0.0),
                network_bytes=max(o.network_bytes - full_b * (1 - keep), 0.0),
                collective=f"{o.collective} (once per step of {micro_batches} micro-batches)",
            )
        options.append(o)
    return replace(menu, options=tuple(options))
