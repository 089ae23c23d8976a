"""One fused attention kernel, as a decoder layer runs it (setup `workload.attention`).

The same kernel the LLM generators emit (generator/ops_attention.py `attention`, dims as
generator/llm_layer.py names them): queries [batch, q_seq, heads], keys and values stacked
[batch, kv_seq, kv=2, kv_heads], FLOP 4 batch q_len kv_len heads head_dim (the generators'
count; a causal kernel is priced from the tiles it executes where the chip is calibrated
for it, solver/cost/causal_attention.py, so the standalone kernel costs what it costs
inside a layer). GQA splits the heads into kv_heads x group.
- forward, q_len = kv_len: K and V are fresh inputs (a prefill or a training forward);
- backward (q_len = kv_len): the query-gradient and key/value-gradient kernels, each
  reading Q, K/V, the output and its gradient (1.25x the forward FLOP each);
- q_len < kv_len: the queries attend to a KV cache read from memory (role KV_CACHE); at
  q_len 1 a decode step, priced by the chip's measured decode-attention table where it
  has one; `decode_attention` KV_PER_QUERY_HEAD makes it the per-query-head kernel on the
  vector unit (llm_inference's decode_attention), every repeated read served by the L2;
  KV_SHARED_UNSPLIT a group-aware kernel with no KV split (one thread block per sequence
  and KV head, solver/cost/unsplit_decode.py; with one query head per KV head the kernel
  splits the cache, so MHA keeps KV_SHARED's pricing).
"""

from __future__ import annotations

from pathlib import Path

from generator.builder import GraphBuilder
from generator.graph import Pass, Phase, Workload
from generator.ops import IN, KV
from generator.ops_attention import attention, per_query_head
from generator.precision import Precision
from schema import setup_pb2


def attention_workload(req: setup_pb2.Attention, prec: Precision, path: Path) -> Workload:
    kv_heads = req.kv_heads or req.heads
    kv_len = req.kv_len or req.q_len  # sizes checked by schema.validation (_check_attention)
    a = prec.activation_bytes
    b = GraphBuilder("attention")
    if kv_heads == req.heads:
        qh: tuple[tuple[str, int], ...] = (("heads", req.heads),)
        kh: tuple[tuple[str, int], ...] = (("heads", req.heads),)
    else:
        qh = (("kv_heads", kv_heads), ("group", req.heads // kv_heads))
        kh = (("kv_heads", kv_heads),)
    batch, q_seq, kv_seq = ("batch", req.batch), ("q_seq", req.q_len), ("kv_seq", kv_len)
    head_dim = ("head_dim", req.head_dim)
    qd = (batch, q_seq, *qh, head_dim)
    kvd = (batch, kv_seq, ("kv", 2), *kh, head_dim)
    cached = kv_len > req.q_len
    backward = req.backward
    q = b.input(qd, a, requires_grad=backward)
    if cached:
        kv_in = ("kv_cache", None, kvd, KV, prec.kv_bytes)
    else:
        kv_in = ("kv", b.input(kvd, a, requires_grad=backward), kvd, IN, a)
    flop = 4 * req.batch * req.q_len * kv_len * req.heads * req.head_dim
    split = "kv_seq" if req.q_len == 1 else "q_seq"
    out = attention(
        b,
        "attention",
        [("q", q, qd, IN, a), kv_in],
        qd,
        flop,
        abpe=a,
        cls="Va_Mqa" if cached and req.q_len == 1 else "Ma_Mqa",
        shardable=["batch", *(d for d, _ in qh), split],
        unsplit_kv=req.decode_attention == setup_pb2.KV_SHARED_UNSPLIT,
    )
    kv_elements = req.batch * kv_len * 2 * kv_heads * req.head_dim
    per_head = req.decode_attention == setup_pb2.KV_PER_QUERY_HEAD
    if per_head and req.q_len == 1 and kv_heads < req.heads:
        per_query_head(b, "attention", req.heads // kv_heads, kv_elements, prec.kv_bytes)
    if backward:
        b.backward([out])
        forward = [k for k in b.kernels if b.kernels[k].pass_ == Pass.FWD]
        for name in forward:  # the backward kernels alone: their inputs are read from memory
            del b.kernels[name]
        b.edges = [e for e in b.edges if e.src not in forward and e.dst not in forward]
    return Workload(
        kind="attention",
        phases=(Phase("attention", b.graph()),),
        # resident in DRAM beside the step's activations
        kv_cache_bytes=kv_elements * prec.kv_bytes if cached else 0.0,
        activation_bytes_per_element=a,
        weight_bytes_per_param=prec.weight_bytes,
        compute_dtype=prec.math,
    )
