"""Pin Megatron-LM's tensor-parallel sharding on a generated LLM workload.

A validation row measures one software stack's mapping, not the optimum: the solver would
otherwise pick a better sharding than the measured run used (e.g. split the LayerNorms on
tokens without sequence parallelism) and under-predict its time. Megatron's rules, by the
generator's semantic dim names:
  heads / kv_heads (QKV, attention, o_proj), ffn (MLP), experts (MoE), vocab (embedding,
  LM head, loss) are split across the TP group; everything else (norms, residuals) is
  replicated, or split on tokens with sequence parallelism. A split reduction dim ends in
  an all-reduce, or a reduce-scatter with sequence parallelism.
A pin the kernel's menu does not offer is left to the solver (listed in the notes).
"""

from __future__ import annotations

from dataclasses import replace

from generator.graph import Kernel, KernelGraph, Phase, Workload
from solver.cost.menus import sharding_choices

SPLIT_DIMS = ("kv_heads", "heads", "ffn", "experts", "vocab")


def megatron_sharding(kernel: Kernel, sequence_parallel: bool) -> str:
    """The sharding Megatron-LM uses for this kernel (a `sharding_choices` name)."""
    dims = kernel.dim_sizes
    for d in SPLIT_DIMS:
        if d in dims:
            if sequence_parallel and d in kernel.reduction_dims:
                return f"{d}+rs"
            return d
    if sequence_parallel and "tokens" in dims:
        return "tokens"
    return "none"


def _pin_graph(graph: KernelGraph, tp: int, sp: bool, unpinned: list[str]) -> KernelGraph:
    kernels = []
    for k in graph.kernels:
        want = megatron_sharding(k, sp)
        if want not in sharding_choices(k, tp):
            unpinned.append(f"{graph.name}/{k.name} ({want})")
            kernels.append(k)
        else:
            kernels.append(replace(k, pinned_sharding=want))
    return replace(graph, kernels=tuple(kernels))


def pin_megatron(workload: Workload, tp: int) -> tuple[Workload, list[str]]:
    """The workload with every kernel's TP sharding pinned; and the kernels left free."""
    if tp <= 1:
        return workload, []
    unpinned: list[str] = []
    sp = workload.sequence_parallel
    phases = tuple(
        Phase(p.name, _pin_graph(p.graph, tp, sp, unpinned), p.count, p.steps, p.role)
        for p in workload.phases
    )
    return replace(workload, phases=phases), unpinned
