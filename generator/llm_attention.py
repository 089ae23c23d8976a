"""Attention pieces of one transformer layer beside the fused kernel (generator/llm_layer.py):
the unfused form (scores through memory) and GPT-OSS's learned attention sinks. Dim names
are llm_layer's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from generator.builder import Dims, GraphBuilder, Tensor
from generator.graph import Operand, OperandRole
from generator.models import ModelConfig
from generator.ops import IN
from generator.ops_attention import AttnInput, bmm, dropout, softmax


@dataclass(frozen=True)
class AttnSegment:
    """One attention kernel: `batch` sequences of `q_seq` queries over `kv_seq` keys."""

    name: str
    batch: int
    q_seq: int
    kv_seq: int
    cached: bool  # keys/values read from the KV cache (role KV_CACHE) instead of kv_proj
    cls: str  # Ma_Mqa (prefill) or Va_Mqa (decode)
    # a sliding-window layer's window (tokens) over a self-attention or a prefill chunk
    # against its cache: the kernel skips the key tiles outside it (Kernel.attention_window);
    # 0 = none
    window: int = 0


class _Shape(Protocol):
    @property
    def dropout(self) -> bool: ...


class LayerParts(Protocol):
    """What the unfused attention reads of a layer under construction (llm_layer.Layer):
    its builder, model, activation and weight bytes per element, shape and core kernels."""

    b: GraphBuilder
    cfg: ModelConfig
    a: float
    w: float
    shape: _Shape
    core: list[str]


def add_sinks(b: GraphBuilder, kernel: str, heads: Dims, wbpe: float) -> None:
    """GPT-OSS's sinks: one learned logit per query head that joins every softmax row's
    denominator (attention paid to no key). They are weights of the kernel that computes the
    softmax (the fused attention kernel, or the unfused softmax), split with its heads; the
    one extra exponential per row and the sinks' gradient are left out (64 values a layer)."""
    k = b.kernels[kernel]
    sinks = Operand("sinks", OperandRole.WEIGHT, tuple(d for d, _ in heads), wbpe)
    b.kernels[kernel] = replace(k, operands=(*k.operands, sinks))


def unfused_attention(
    layer: LayerParts,
    seg: AttnSegment,
    q_in: AttnInput,
    kv_in: AttnInput,
    qh: Dims,
    kh: Dims,
    split: str,
) -> Tensor:
    """Attention as separate kernels, the scores S (batch, heads, q_seq, kv_seq) going
    through memory: S = Q K^T (`<seg>_scores`), P = softmax(S) (`<seg>_softmax`),
    dropout(P) in training (`<seg>_dropout`), O = P V (`<seg>_context`)."""
    b, c, a = layer.b, layer.cfg, layer.a
    Bd, Q, K = ("batch", seg.batch), ("q_seq", seg.q_seq), ("kv_seq", seg.kv_seq)
    D = ("head_dim", c.head_dim)
    _, kt, _, krole, kbpe = kv_in  # keys and values stacked on the `kv` dim
    kd = (Bd, K, *kh, D)
    if kt is None:  # the KV cache: keys and values are read from memory
        k_in, v_in = ("k_cache", None, kd, krole, kbpe), ("v_cache", None, kd, krole, kbpe)
    else:
        k_in = ("k", b.part(kt, kd), kd, krole, kbpe)
        v_in = ("v", b.part(kt, kd), kd, krole, kbpe)
    S = (Bd, *qh, Q, K)
    shard = ["batch", *[d for d, _ in qh], split]
    s_ = bmm(b, f"{seg.name}_scores", [q_in, k_in], S, abpe=a, cls=seg.cls, shardable=shard)
    p = softmax(b, f"{seg.name}_softmax", s_, abpe=a, shardable=shard)
    if c.attn_sinks:
        add_sinks(b, f"{seg.name}_softmax", qh, layer.w)
    names = [f"{seg.name}_scores", f"{seg.name}_softmax"]
    if layer.shape.dropout:
        p = dropout(b, f"{seg.name}_dropout", p, abpe=a, shardable=shard)
        names.append(f"{seg.name}_dropout")
    out = bmm(
        b,
        f"{seg.name}_context",
        [("probs", p, S, IN, a), v_in],
        (Bd, Q, *qh, D),
        abpe=a,
        cls=seg.cls,
        shardable=shard,
    )
    layer.core.extend([*names, f"{seg.name}_context"])
    return out
