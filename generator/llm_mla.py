"""DeepSeek-V2 multi-head latent attention (MLA) for one transformer layer; the dim names
are llm_layer's (MLA adds q_lora, kv_lora, rope, qk_nope, v_head_dim, kv_latent, kv_up,
kv_dim)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from generator.builder import Tensor, dims_elements
from generator.graph import KernelKind
from generator.ops import IN, KV, binary
from generator.ops_attention import attention, kv_write

if TYPE_CHECKING:
    from generator.llm_layer import Layer


def mla(layer: Layer, h: Tensor) -> Tensor:
    """DeepSeek-V2 multi-head latent attention. Training/prefill: keys and values are
    decompressed (kv_b_proj). Inference with a KV cache (absorbed): W_UK is folded into
    the query and W_UV applied after attention, so attention runs over the cached latent
    (kv_lora_rank + qk_rope_head_dim per token)."""
    b, c, T, H = layer.b, layer.cfg, layer.T, layer.H
    Hh = ("heads", c.heads)
    NOPE, R = ("qk_nope", c.qk_nope_head_dim), ("rope", c.qk_rope_head_dim)
    D, V = ("head_dim", c.qk_nope_head_dim + c.qk_rope_head_dim), ("v_head_dim", c.v_head_dim)
    LORA, LAT = ("kv_lora", c.kv_lora_rank), ("kv_latent", c.kv_lora_rank + R[1])
    heads_shard = ["tokens", "heads", "hidden"]
    if c.q_lora_rank:
        QL = ("q_lora", c.q_lora_rank)
        qa = layer.norm(
            "q_a_norm",
            layer.lin("q_a_proj", h, (T, H), (H, QL), (T, QL), shardable=["tokens", "hidden"]),
        )
        q = layer.lin(
            "q_b_proj",
            qa,
            (T, QL),
            (QL, Hh, D),
            (T, Hh, D),
            shardable=["tokens", "heads", "q_lora"],
        )
    else:
        q = layer.lin("q_proj", h, (T, H), (H, Hh, D), (T, Hh, D), shardable=heads_shard)
    ckv = layer.lin("kv_a_proj", h, (T, H), (H, LAT), (T, LAT), shardable=["tokens", "hidden"])
    ckv = layer.norm("kv_a_norm", ckv, weight=(LORA,))
    if layer.shape.kv_write:
        kv_write(b, "kv_write", ckv, ckv.dims, abpe=layer.a, kv_bpe=layer.kvb, shardable=["tokens"])
    outs = []
    if not layer.shape.absorbed:
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
        o_in = (T, Hh, V)
        o_src = layer.concat(outs, o_in)
    else:
        ql = layer.lin(
            "q_absorb",
            b.part(q, (T, Hh, NOPE)),
            (T, Hh, NOPE),
            (Hh, NOPE, LORA),
            (T, Hh, LORA),
            kind=KernelKind.BATCHED_GEMM,
            shardable=["tokens", "heads"],
        )
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
        ov = layer.lin(
            "v_absorb",
            layer.concat(outs, lat),
            lat,
            (Hh, LORA, V),
            (T, Hh, V),
            kind=KernelKind.BATCHED_GEMM,
            shardable=["tokens", "heads"],
        )
        o_in, o_src = (T, Hh, V), ov
    return layer.lin(
        "o_proj", o_src, o_in, (Hh, V, H), (T, H), shardable=["tokens", "hidden", "heads"]
    )
