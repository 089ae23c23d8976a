"""DeepSeek-V2 multi-head latent attention (MLA) for one transformer layer; the dim names
are llm_layer's (MLA adds q_lora, kv_lora, rope, qk_nope, v_head_dim, kv_latent, kv_up,
kv_dim)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from generator.builder import Dim, Tensor, dims_elements
from generator.graph import KernelKind
from generator.models import ModelConfig
from generator.ops import IN, KV, binary
from generator.ops_attention import attention, kv_write

if TYPE_CHECKING:
    from generator.llm_layer import Layer


class MlaDims(NamedTuple):
    """MLA's loop dims with their sizes, from the model config."""

    heads: Dim
    nope: Dim  # per-head query/key width without position (qk_nope)
    rope: Dim  # per-head rotary width (qk_rope), shared by all heads in the latent
    head_dim: Dim  # per-head query/key width: qk_nope + qk_rope
    v_head_dim: Dim
    lora: Dim  # the compressed key/value latent (kv_lora_rank)
    latent: Dim  # what the KV cache holds per token: kv_lora + rope

    @classmethod
    def of(cls, c: ModelConfig) -> MlaDims:
        rope = ("rope", c.qk_rope_head_dim)
        return cls(
            heads=("heads", c.heads),
            nope=("qk_nope", c.qk_nope_head_dim),
            rope=rope,
            head_dim=("head_dim", c.qk_nope_head_dim + c.qk_rope_head_dim),
            v_head_dim=("v_head_dim", c.v_head_dim),
            lora=("kv_lora", c.kv_lora_rank),
            latent=("kv_latent", c.kv_lora_rank + rope[1]),
        )


def mla(layer: Layer, h: Tensor) -> Tensor:
    """DeepSeek-V2 multi-head latent attention. Training/prefill: keys and values are
    decompressed (kv_b_proj). Inference with a KV cache (absorbed): W_UK is folded into
    the query and W_UV applied after attention, so attention runs over the cached latent
    (kv_lora_rank + qk_rope_head_dim per token)."""
    T, H = layer.T, layer.H
    m = MlaDims.of(layer.cfg)
    q = _query(layer, h, m)
    ckv = _latent(layer, h, m)
    if not layer.shape.absorbed:
        o_src = _decompressed_attention(layer, q, ckv, m)
    else:
        o_src = _absorbed_attention(layer, q, m)
    o_in = (T, m.heads, m.v_head_dim)
    return layer.lin(
        "o_proj",
        o_src,
        o_in,
        (m.heads, m.v_head_dim, H),
        (T, H),
        shardable=["tokens", "hidden", "heads"],
    )


def _query(layer: Layer, h: Tensor, m: MlaDims) -> Tensor:
    """The queries, through a low-rank bottleneck (q_a_proj, norm, q_b_proj) when the model
    has q_lora_rank, else one projection."""
    c, T, H = layer.cfg, layer.T, layer.H
    Hh, D = m.heads, m.head_dim
    if not c.q_lora_rank:
        return layer.lin(
            "q_proj", h, (T, H), (H, Hh, D), (T, Hh, D), shardable=["tokens", "heads", "hidden"]
        )
    QL = ("q_lora", c.q_lora_rank)
    qa = layer.norm(
        "q_a_norm",
        layer.lin("q_a_proj", h, (T, H), (H, QL), (T, QL), shardable=["tokens", "hidden"]),
    )
    return layer.lin(
        "q_b_proj",
        qa,
        (T, QL),
        (QL, Hh, D),
        (T, Hh, D),
        shardable=["tokens", "heads", "q_lora"],
    )


def _latent(layer: Layer, h: Tensor, m: MlaDims) -> Tensor:
    """The compressed key/value latent and the shared rotary key (kv_a_proj, norm on the
    latent part): what an inference step writes to the KV cache."""
    T, H = layer.T, layer.H
    ckv = layer.lin(
        "kv_a_proj", h, (T, H), (H, m.latent), (T, m.latent), shardable=["tokens", "hidden"]
    )
    ckv = layer.norm("kv_a_norm", ckv, weight=(m.lora,))
    if layer.shape.kv_write:
        kv_write(
            layer.b, "kv_write", ckv, ckv.dims, abpe=layer.a, kv_bpe=layer.kvb, shardable=["tokens"]
        )
    return ckv


def _decompressed_attention(
    layer: Layer, q: Tensor, ckv: Tensor, m: MlaDims
) -> Tensor | tuple[Tensor, ...]:
    """Training and prefill: the latent decompressed to per-head keys and values
    (kv_b_proj, with the rotary key appended), then ordinary attention per segment."""
    b, c, T = layer.b, layer.cfg, layer.T
    Hh, NOPE, R, D, V, LORA = m.heads, m.nope, m.rope, m.head_dim, m.v_head_dim, m.lora
    KU, KD = ("kv_up", NOPE[1] + V[1]), ("kv_dim", D[1] + V[1])
    kvu = layer.lin(
        "kv_b_proj",
        b.part(ckv, (T, LORA)),
        (T, LORA),
        (LORA, Hh, KU),
        (T, Hh, KU),
        shardable=["tokens", "heads", "kv_lora"],
    )
    kvf = binary(
        b,
        "kv_expand",
        [("in1", kvu, (T, Hh, KU)), ("in2", b.part(ckv, (T, R)), (T, R))],
        (T, Hh, KD),
        dims_elements((T, Hh, KD)),
        abpe=layer.a,
        kind=KernelKind.ELEMENTWISE,
        cls="Va_Va",
        shardable=["tokens", "heads"],
    )
    outs = []
    for seg in layer.shape.segments:
        Bd, Q, K = ("batch", seg.batch), ("q_seq", seg.q_seq), ("kv_seq", seg.kv_seq)
        qd, kvd = (Bd, Q, Hh, D), (Bd, K, Hh, KD)
        flop = 2 * seg.batch * seg.q_seq * seg.kv_seq * c.heads * (D[1] + V[1])
        outs.append(
            attention(
                b,
                seg.name,
                [
                    ("q", layer.seg_view(q, qd), qd, IN, layer.a),
                    ("kv", layer.seg_view(kvf, kvd), kvd, IN, layer.a),
                ],
                (Bd, Q, Hh, V),
                flop,
                abpe=layer.a,
                cls=seg.cls,
                shardable=["batch", "heads", "q_seq"],
            )
        )
    return layer.concat(outs, (T, Hh, V))


def _absorbed_attention(layer: Layer, q: Tensor, m: MlaDims) -> Tensor:
    """Inference over the cached latent: W_UK folded into the query (q_absorb), attention
    of the latent query and the rotary query over the cache, W_UV applied after
    (v_absorb). The attention reads the latent from the KV cache, not from kv_a_proj."""
    b, c, T = layer.b, layer.cfg, layer.T
    Hh, NOPE, R, V, LORA, LAT = m.heads, m.nope, m.rope, m.v_head_dim, m.lora, m.latent
    ql = layer.lin(
        "q_absorb",
        b.part(q, (T, Hh, NOPE)),
        (T, Hh, NOPE),
        (Hh, NOPE, LORA),
        (T, Hh, LORA),
        kind=KernelKind.BATCHED_GEMM,
        shardable=["tokens", "heads"],
    )
    outs = []
    for seg in layer.shape.segments:
        Bd, Q, K = ("batch", seg.batch), ("q_seq", seg.q_seq), ("kv_seq", seg.kv_seq)
        flop = 2 * seg.batch * seg.q_seq * seg.kv_seq * c.heads * (2 * LORA[1] + R[1])
        outs.append(
            attention(
                b,
                seg.name,
                [
                    (
                        "q_latent",
                        layer.seg_view(ql, (Bd, Q, Hh, LORA)),
                        (Bd, Q, Hh, LORA),
                        IN,
                        layer.a,
                    ),
                    ("q_rope", b.part(q, (Bd, Q, Hh, R)), (Bd, Q, Hh, R), IN, layer.a),
                    ("kv_cache", None, (Bd, K, LAT), KV, layer.kvb),
                ],
                (Bd, Q, Hh, LORA),
                flop,
                abpe=layer.a,
                cls=seg.cls,
                shardable=["batch", "heads", "kv_seq" if seg.q_seq == 1 else "q_seq"],
            )
        )
    lat = (T, Hh, LORA)
    return layer.lin(
        "v_absorb",
        layer.concat(outs, lat),
        lat,
        (Hh, LORA, V),
        (T, Hh, V),
        kind=KernelKind.BATCHED_GEMM,
        shardable=["tokens", "heads"],
    )
