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
kernels' share of the layer graph's FLOP times its latency.

The ring also merges: Transformer Engine's AttnFuncWithCP (the implementation Megatron-core
calls) runs one attention kernel per ring step, each returning a partial output and its
softmax statistics, and merges them in 16-bit memory-bound passes that no ring hop covers:
  forward   out zeroed once (Q writes), then per step out += out_step x exp(lse_step - lse)
            (read out_step, read and write out: 3 Q element passes);
  backward  per step dq += dq_step (3 Q passes) and dkv += dkv_step (3 KV passes),
with Q = the rank's query elements (tokens / c x heads / TP x head dim), KV = its K/V block.
Under causal load balancing a rank's step covers all its queries (or all its K/V) or half;
the ranks wait on each other at every hop, so the busiest rank sets the pace: every step
of rank c - 1 covers all its queries, and its off-diagonal backward steps half its K/V:
  merge bytes = e x (Q + 3 c Q + 3 c Q + 3 (c + 1) / 2 x KV), e = bytes per element,
read and written at the chip's DRAM bandwidth per layer and micro-batch. Not modelled: the
forward ring repeated by a recomputed attention, the softmax-statistics merges (per token
and head, 1/head_dim of the output), and hop latency beyond the alpha of the level.
"""

from __future__ import annotations

import math

from generator.graph import KernelKind, Pass, Phase, Workload
from solver.cost.collectives import hierarchical_time
from solver.cost.latency import exposed_under
from solver.search import stages
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


def merge_bytes(workload: Workload, phase: Phase, tp: int, cp: int) -> float:
    """DRAM bytes of the busiest CP rank's partial-result merges, one layer and micro-batch
    (module docstring: forward output corrections, backward dq and dK/dV accumulation)."""
    if cp <= 1:
        return 0.0
    model = workload.model
    assert model is not None, "context parallelism needs an LLM workload"
    e = workload.activation_bytes_per_element
    kv = kv_block_bytes(workload, phase, tp) / e
    heads = max(model.num_heads / tp, 1.0)
    head_dim = model.head_dim or model.hidden_size // max(model.num_heads, 1)
    tokens = next(k.dim_sizes["tokens"] for k in phase.graph.kernels if "tokens" in k.dim_sizes)
    q = tokens * heads * head_dim
    return e * (q + 6 * cp * q + 1.5 * (cp + 1) * kv)


def ring_exposed_s(
    block_bytes: float,
    span: Span,
    cp: int,
    attn_fwd_s: float,
    attn_bwd_s: float,
    hidden: float = 1.0,
) -> tuple[float, float]:
    """(exposed, moved) seconds of one layer's CP ring for one micro-batch; `hidden`: the
    share h of a hop's overlap with its attention step that hides (1 = the module
    docstring's max(0, hop - step); solver.cost.latency.exposed_under)."""
    if cp <= 1:
        return 0.0, 0.0
    hop_f = hierarchical_time("p2p", block_bytes, span)
    hop_b = hierarchical_time("p2p", 2 * block_bytes, span)
    fwd = exposed_under(hop_f, attn_fwd_s / cp, hidden)
    exposed = (cp - 1) * (fwd + exposed_under(hop_b, attn_bwd_s / cp, hidden))
    return exposed, (cp - 1) * (hop_f + hop_b)


def stage_ring_s(
    workload: Workload,
    span: Span,
    tp: int,
    pp: int,
    phase_latency: dict[str, float],
    dram_Bps: float = math.inf,
    hidden: float = 1.0,
) -> float:
    """Exposed CP ring time of one pipeline stage for one micro-batch: what the hops add to
    the attention steps (`hidden`: ring_exposed_s) and the partial-result merges at
    `dram_Bps`."""
    cp = workload.context_parallel
    if cp <= 1:
        return 0.0
    total = 0.0
    for p in workload.phases:
        if p.role != "layer":
            continue
        f, b = attention_shares(p)
        lat = phase_latency[p.name]
        block = kv_block_bytes(workload, p, tp)
        exposed, _ = ring_exposed_s(block, span, cp, f * lat, b * lat, hidden)
        merge = merge_bytes(workload, p, tp, cp) / dram_Bps
        total += stages.stage_layers(workload, p, pp) * (exposed + merge)
    return total
