"""Context parallelism (ring attention): the K/V traffic of the CP ring per layer and the
part of it the attention compute does not hide. Closed forms, checked by hand in tests.

With CP = c, every rank holds s/c of each sequence's tokens (the generator builds one rank's
graphs: s/c queries against all s keys). The attention of a layer runs in c steps; at each
step a rank computes against the K/V block it holds while it passes that block to its ring
neighbour and receives the next one (Liu et al. 2023, "Ring Attention"; Megatron-LM /
Transformer Engine context parallelism). The first block is the rank's own, so c - 1 blocks
travel, each hop hidden under one step's compute (1/c of the attention time):
  forward   (c - 1) * max(0, T_p2p(kv) - A_f / c)
  backward  (c - 1) * max(0, T_p2p(2 kv) - A_b / c)   (K/V and their gradients travel)
kv = one rank's K/V block: tokens / c x (KV heads / TP) x head dim x 2 (K and V) x bytes;
A_f, A_b = forward / backward attention time of the layer on one rank, the attention
kernels' share of the layer graph's FLOP times its latency. Not modelled: the forward ring
repeated by a recomputed attention, and hop latency beyond the alpha of the level.
"""

from __future__ import annotations

import math

from generator.graph import KernelKind, Pass, Phase, Workload
from solver.cost.collectives import hierarchical_time
from solver.search.parallel import Span

ATTENTION_KINDS = (KernelKind.ATTENTION, KernelKind.BATCHED_GEMM)
BACKWARD = (Pass.BWD, Pass.WGRAD, Pass.RECOMPUTE)


def kv_block_bytes(workload: Workload, phase: Phase, tp: int) -> float:
    """One rank's K/V block of one layer for one micro-batch (its share of the TP group)."""
    model = workload.model
    assert model is not None, "context parallelism needs an LLM workload"
    tokens = next(k.dim_sizes["tokens"] for k in phase.graph.kernels if "tokens" in k.dim_sizes)
    kv_heads = max(model.num_kv_heads or model.num_heads, 1)
    per_chip_heads = max(kv_heads / tp, 1.0)
    head_dim = model.head_dim or model.hidden_size // max(model.num_heads, 1)
    return tokens * per_chip_heads * head_dim * 2 * workload.activation_bytes_per_element


def attention_shares(phase: Phase) -> tuple[float, float]:
    """(forward, backward) attention FLOP as fractions of the layer graph's FLOP."""
    total = fwd = bwd = 0.0
    for k in phase.graph.kernels:
        total += k.flop
        if k.kind in ATTENTION_KINDS:
            if k.pass_ == Pass.FWD:
                fwd += k.flop
            elif k.pass_ in BACKWARD:
                bwd += k.flop
    return (fwd / total, bwd / total) if total > 0 else (0.0, 0.0)


def ring_exposed_s(
    block_bytes: float, span: Span, cp: int, attn_fwd_s: float, attn_bwd_s: float
) -> tuple[float, float]:
    """(exposed, moved) seconds of one layer's CP ring for one micro-batch."""
    if cp <= 1:
        return 0.0, 0.0
    hop_f = hierarchical_time("p2p", block_bytes, span)
    hop_b = hierarchical_time("p2p", 2 * block_bytes, span)
    exposed = (cp - 1) * (max(0.0, hop_f - attn_fwd_s / cp) + max(0.0, hop_b - attn_bwd_s / cp))
    return exposed, (cp - 1) * (hop_f + hop_b)


def stage_ring_s(
    workload: Workload, span: Span, tp: int, pp: int, phase_latency: dict[str, float]
) -> float:
    """Exposed CP ring time of one pipeline stage for one micro-batch."""
    cp = workload.context_parallel
    if cp <= 1:
        return 0.0
    total = 0.0
    for p in workload.phases:
        if p.role != "layer":
            continue
        f, b = attention_shares(p)
        lat = phase_latency[p.name]
        exposed, _ = ring_exposed_s(kv_block_bytes(workload, p, tp), span, cp, f * lat, b * lat)
        total += math.ceil(p.count / pp) * exposed
    return total
