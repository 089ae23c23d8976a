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
A_f, A_b = forward / backward compute time of the layer's attention kernels on one rank
(its share of the TP group's heads), priced as the cost model prices those kernels
(kernel_times: a causal kernel from its executed tiles), not a FLOP share of the layer:
fused causal attention runs ~1.6x faster per counted FLOP than the layer's GEMMs, so a
share would stretch the window the hops hide under.

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
from dataclasses import replace

from generator.graph import KernelKind, Pass, Phase, Workload
from hardware.system import Chip
from solver.cost import causal_attention, efficiency, kernel_times
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


def attention_seconds(workload: Workload, chip: Chip, tp: int) -> dict[str, tuple[float, float]]:
    """(forward, backward) compute seconds of each layer phase's attention kernels on one
    rank of a TP group of `tp` chips (the heads split over it), by phase name."""
    precision = kernel_times.attention_precision(workload.compute_dtype.lower())
    chip = efficiency.for_precision(chip, precision)
    seconds = {}
    for p in workload.phases:
        fwd = bwd = 0.0
        for k in p.graph.kernels:
            if k.kind not in ATTENTION_KINDS or k.pass_ not in (Pass.FWD, *BACKWARD):
                continue
            shape = causal_attention.kernel_shape(k, k.dim_sizes)
            if shape is not None:
                shape = replace(shape, pairs=math.ceil(shape.pairs / tp))
            t = kernel_times.kernel_compute_time(
                k, chip, None, k.flop / tp, precision, causal=shape
            )
            if k.pass_ == Pass.FWD:
                fwd += t.seconds
            else:
                bwd += t.seconds
        seconds[p.name] = (fwd, bwd)
    return seconds


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
    attention_s: dict[str, tuple[float, float]],
    dram_Bps: float = math.inf,
    hidden: float = 1.0,
) -> float:
    """Exposed CP ring time of one pipeline stage for one micro-batch: what the hops add to
    the attention steps (`attention_s`: attention_seconds; `hidden`: ring_exposed_s) and
    the partial-result merges at `dram_Bps`."""
    cp = workload.context_parallel
    if cp <= 1:
        return 0.0
    total = 0.0
    for p in workload.phases:
        if p.role != "layer":
            continue
        fwd, bwd = attention_s[p.name]
        block = kv_block_bytes(workload, p, tp)
        exposed, _ = ring_exposed_s(block, span, cp, fwd, bwd, hidden)
        merge = merge_bytes(workload, p, tp, cp) / dram_Bps
        total += stages.stage_layers(workload, p, pp) * (exposed + merge)
    return total
