"""An MoE layer's routed token slots: how many each expert takes, the share of experts
they reach, and what the routed kernels carry (Kernel.expert_share, the grouped-GEMM flags,
the per-expert host ops and launches). generator.llm_layer builds the layer with them."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

from generator import ops_moe
from generator.graph import Kernel, KernelGraph, KernelKind
from generator.ops_fp8 import is_quantize


def expert_tokens(tokens: int, k: int, experts: int, capacity_factor: float) -> int:
    """Tokens per expert: ceil(tokens*k/E*capacity_factor); capacity 0 = ceil(tokens*k/E)."""
    if capacity_factor <= 0:
        return -(-tokens * k // experts)
    cf = Fraction(capacity_factor).limit_denominator(1_000_000)
    return math.ceil(Fraction(tokens * k) * cf / experts)


def routed_expert_share(tokens: int, k: int, experts: int) -> float:
    """The expected share of the experts at least one of `tokens` tokens routes to, each
    token choosing k distinct experts uniformly: 1 - (1 - k / experts) ** tokens. A
    decode step of one sequence reaches k experts (Qwen3-30B-A3B: 8 of 128); a prefill's
    thousands of tokens reach every one."""
    return 1.0 - (1.0 - min(k, experts) / experts) ** tokens


def with_expert_kernels(
    graph: KernelGraph, share: float, fused: bool, torch_grouped: bool = False
) -> KernelGraph:
    """The graph with `share` (Kernel.expert_share) on every kernel over an MoE layer's
    routed token slots (the dims experts and expert_tokens: dispatch's output, the expert
    GEMMs, their activation, sorts and gradients; not the router, which scores every
    expert), and `fused` (Kernel.fused_experts) and `torch_grouped` on its expert GEMMs;
    not fused, the per-expert loop's ops on its kernels (Kernel.host_loop_ops) and the FP8
    quantisations of its GEMMs' inputs and output gradients issued expert by expert
    (Kernel.per_expert_launches: Transformer Engine's GroupedLinear splits the tensor and
    quantizes each expert's part with its own scale, and a loop's per-expert linear layers
    each quantize their own input)."""
    if not any("experts" in k.dim_sizes for k in graph.kernels):
        return graph

    def routed(k: Kernel) -> Kernel:
        if not {"experts", "expert_tokens"} <= k.dim_sizes.keys():
            return k
        gemm = fused and k.kind == KernelKind.BATCHED_GEMM
        per_expert = not fused and is_quantize(k.name)
        if fused:
            loop = 0
        elif per_expert:  # a quantisation issued per expert is that many ops of the host's
            loop = k.launches
        else:
            loop = ops_moe.PER_EXPERT_HOST_OPS.get(k.name.removesuffix("_recompute"), 0)
        return replace(
            k,
            expert_share=min(share, 1.0),
            fused_experts=gemm,
            torch_grouped=gemm and torch_grouped,
            # torch._grouped_mm launches a kernel writing the groups' GEMM arguments first
            launches=2 if gemm and torch_grouped else k.launches,
            host_loop_ops=loop,
            per_expert_launches=per_expert,
        )

    return replace(graph, kernels=tuple(routed(k) for k in graph.kernels))
