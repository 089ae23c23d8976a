"""One transformer layer written as a forward pass, emitting einsum kernels.

Dim names are semantic and shared across kernels, so the solver matches layouts by name:
  tokens      batch x sequence of this graph instance (flattened)
  hidden      model width
  heads       query heads (MHA and MLA); GQA/MQA split them as kv_heads x group
  kv_heads    key/value heads;  group: query heads per KV head
  head_dim    per-head query/key width (MLA: qk_nope + qk_rope)
  kv          2: key and value stacked (one K/V tensor, one KV-cache operand)
  ffn         MLP width; gate_up: 2 (gate and up projections fused, SwiGLU/GeGLU)
  experts, expert_tokens   MoE expert batch: tokens routed to each expert (capacity)
  batch, q_seq, kv_seq     attention: sequences, query positions, key positions
  vocab       vocabulary; positions: learned position table rows
  MLA: q_lora, kv_lora (latent), rope, qk_nope, v_head_dim, kv_latent (kv_lora + rope:
  what the KV cache holds), kv_up (qk_nope + v_head_dim per head), kv_dim (per-head K and V)

Attention is one fused kernel (FlashAttention style) unless the shape asks for the unfused
form (QK^T, softmax, dropout, AV as kernels of their own, the scores through DRAM), as
Megatron-LM and plain PyTorch ran it; training dropout also masks the two residual branches.

Megatron tensor parallelism is a split of one dim: q/kv projections and attention on heads
(kv_heads for GQA), o_proj reduces over heads (split -> all-reduce); MLP up on ffn, down
reduces over ffn; MoE experts on experts (the dispatch from a tokens-split producer to an
experts-split consumer is the all-to-all, also flagged on the dispatch/combine kernels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator import ops_moe
from generator.builder import Arg, Dim, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind
from generator.llm_attention import AttnSegment, add_sinks, unfused_attention
from generator.llm_mla import mla
from generator.models import ModelConfig
from generator.moe_routing import expert_tokens, routed_expert_share
from generator.ops import GATED_FLOP, IN, KV, OUT, SOFTMAX_FLOP, add, linear, norm, unary
from generator.ops_attention import (
    attention,
    kv_reread_bytes,
    kv_write,
    per_query_head,
    rope,
)
from generator.ops_eager import eager_gated, eager_rope, eager_squared_relu
from generator.ops_fp8 import FP8_BYTES, fp8_cast
from generator.precision import Precision


@dataclass(frozen=True)
class LayerShape:
    tokens: int  # rows of every GEMM
    segments: tuple[AttnSegment, ...]
    gemm_cls: str = "Ma_Mw"  # Va_Mw for decode
    kv_write: bool = False  # inference: store the new tokens' K/V
    absorbed: bool = False  # MLA inference: attention over the latent cache
    unfused_attention: bool = False  # QK^T, softmax, (dropout), AV as kernels of their own
    # decode attention is a per-query-head kernel (DecodeAttention KV_PER_QUERY_HEAD:
    # generator/ops_attention.per_query_head), not a group-aware one
    kv_per_query_head: bool = False
    # ... or a group-aware one with no KV split (DecodeAttention KV_SHARED_UNSPLIT)
    kv_unsplit: bool = False
    # the experts' GEMMs as one grouped kernel (MoeGemm MOE_GEMM_GROUPED: fused_experts)
    fused_experts: bool = False
    torch_grouped: bool = False  # ... torch._grouped_mm's (MOE_GEMM_TORCH_GROUPED)
    # ... and this share of its G - 1 repeated reads of each KV head misses the L2 (0: the
    # L2 serves them): the KV cache operand carries 1 + (G - 1) x share reads from DRAM
    kv_reread_share: float = 0.0
    dropout: bool = False  # training dropout on attention probabilities and layer outputs
    # FP8 training: each linear layer's 16-bit input and output gradient are cast to FP8 by
    # kernels of their own (generator/ops_fp8.py); inference engines fuse the cast instead
    fp8_casts: bool = False
    # the MLP activation as the framework's eager ops (LlmTraining.eager_activation): squared
    # ReLU and the gated activations differ from one fused kernel each way, GELU does not
    # (generator/ops_eager.py)
    eager_activation: bool = False
    # rotary position embedding as kernels of its own on the queries and the stacked keys and
    # values (training: Megatron-LM's fused RoPE, generator/ops_attention.py `rope`). The
    # value half rides with the keys: it stands for the copies Megatron's split of the one
    # QKV GEMM output costs (the GQA query reshape forward, the split's gradient concat
    # backward), which the model's separate q and kv projections do not have. Inference
    # engines apply RoPE inside their QKV-preprocessing / KV-cache-write kernel.
    rope: bool = False
    # ... as the framework's eager ops (LlmTraining / LlmInference.eager_rope:
    # generator/ops_eager.py `eager_rope`), not one fused kernel each way
    eager_rope: bool = False
    # MoE training with expert parallelism (LlmTraining.expert_parallel): the graph is one TP
    # group's, holding experts / EP of the experts (EP: the TP groups of one EP group), each
    # fed by the routed tokens of all of them; dispatch and combine all-to-all the routed
    # token copies over the "ep" group (generator/moe_layout.py: which chips, which split)
    expert_parallel: int = 1
    # NCCL all-to-all dispatcher: the received chunks sorted by local expert and back
    # (LlmTraining.moe_dispatcher ALLTOALL, with more than one expert per graph)
    sort_chunks: bool = False
    # the routed copies permuted and combined by PyTorch's ops (MoePermute SCATTER_ADD)
    moe_scatter_add: bool = False
    # DeepEP's dispatcher: a token crosses to each destination chip once, not once per
    # routed expert there (Kernel.dedup_experts)
    moe_dedup: bool = False


class Layer:
    """Builds one layer into `b`; `forward()` returns (layer input, layer output)."""

    def __init__(
        self, b: GraphBuilder, cfg: ModelConfig, shape: LayerShape, prec: Precision
    ) -> None:
        self.b, self.cfg, self.shape = b, cfg, shape
        self.a, self.w, self.kvb = prec.activation_bytes, prec.weight_bytes, prec.kv_bytes
        self.T = ("tokens", shape.tokens)
        self.H = ("hidden", cfg.hidden)
        self.core: list[str] = []  # the attention core's kernels (selective recompute)
        self.expert_share = 1.0  # of this rank's experts, the share tokens reach (moe)
        self.fp8: dict[int, Tensor] = {}  # tensor key -> its FP8 copy (one cast per tensor)

    def lin(
        self,
        name: str,
        x: Tensor | tuple[Tensor, ...],
        x_dims: Dims,
        weight: Dims,
        out: Dims,
        fp8: bool = True,
        **kw: Any,
    ) -> Tensor:
        """A linear layer; under `shape.fp8_casts` (and `fp8`: not the router, which
        Megatron keeps in 16-bit) its input is cast to FP8 once per tensor and its output
        gradient in the backward pass."""
        kw.setdefault("cls", self.shape.gemm_cls)
        if self.shape.fp8_casts and fp8 and isinstance(x, Tensor) and not x.part:
            if x.key not in self.fp8:
                allowed = kw.get("shardable") or [d for d, _ in x.dims]
                keep = [d for d, _ in x.dims if d in allowed]
                self.fp8[x.key] = fp8_cast(self.b, f"{name}_in", x, abpe=self.a, shardable=keep)
            x = self.fp8[x.key]
            kw.update(in_bpe=FP8_BYTES, fp8_grad=True)
        return linear(self.b, name, x, x_dims, weight, out, wbpe=self.w, abpe=self.a, **kw)

    def norm(self, name: str, x: Tensor, weight: Dims | None = None) -> Tensor:
        return norm(self.b, name, x, kind=self.cfg.norm, wbpe=self.w, abpe=self.a, weight=weight)

    # -- the layer -------------------------------------------------------------------------
    def forward(self, moe: bool) -> tuple[Tensor, Tensor]:
        b, T, H = self.b, self.T, self.H
        x = b.input((T, H), self.a)
        h = self.norm("attn_norm", x)
        attn = mla(self, h) if self.cfg.is_mla else self.attention(h)
        assert attn.dims == (T, H), attn.dims
        if self.cfg.post_norms:
            attn = self.norm("post_attn_norm", attn)
        h1 = add(b, "attn_residual", attn, x, abpe=self.a, dropout=self.shape.dropout)
        h = self.norm("mlp_norm", h1)
        mlp = self.moe(h) if moe else self.mlp(h, "mlp", self.cfg.ffn, self.cfg.mlp_bias)
        assert mlp.dims == (T, H), mlp.dims
        if self.cfg.post_norms:
            mlp = self.norm("post_mlp_norm", mlp)
        out = add(b, "mlp_residual", mlp, h1, abpe=self.a, dropout=self.shape.dropout)
        return x, out

    # -- attention -------------------------------------------------------------------------
    def head_dims(self) -> tuple[Dims, Dims]:
        """(query head dims, key/value head dims): heads for MHA, kv_heads x group else."""
        c = self.cfg
        if c.kv_heads == c.heads:
            return (("heads", c.heads),), (("heads", c.heads),)
        return (("kv_heads", c.kv_heads), ("group", c.heads // c.kv_heads)), (
            ("kv_heads", c.kv_heads),
        )

    def seg_view(self, t: Tensor, dims: Dims) -> Tensor:
        if len(self.shape.segments) == 1 and dims_elements(dims) == t.elements:
            return self.b.view(t, dims)
        return self.b.part(t, dims)

    def concat(self, outs: list[Tensor], dims: Dims) -> Tensor | tuple[Tensor, ...]:
        if len(outs) == 1:
            return self.b.view(outs[0], dims)
        return tuple(self.b.part(o, o.dims) for o in outs)

    def attention(self, h: Tensor) -> Tensor:
        b, c, T, H = self.b, self.cfg, self.T, self.H
        qh, kh = self.head_dims()
        D, KVd = ("head_dim", c.head_dim), ("kv", 2)
        qn, kn = [d for d, _ in qh], [d for d, _ in kh]
        q = self.lin(
            "q_proj",
            h,
            (T, H),
            (H, *qh, D),
            (T, *qh, D),
            bias=c.qkv_bias,
            shardable=["tokens", *qn, "hidden"],
        )
        kv = self.lin(
            "kv_proj",
            h,
            (T, H),
            (H, KVd, *kh, D),
            (T, KVd, *kh, D),
            bias=c.qkv_bias,
            shardable=["tokens", *kn, "hidden"],
        )
        assert q.dims == (T, *qh, D) and kv.dims == (T, KVd, *kh, D)
        if c.qk_norm:
            # Qwen3: an RMSNorm over each query and key head (head_dim weights each), before
            # RoPE; the key norm streams the stacked K/V tensor, as kv_rope does
            q = self.norm("q_norm", q, weight=(D,))
            kv = self.norm("k_norm", kv, weight=(D,))
        if self.shape.rope:
            rotate = eager_rope if self.shape.eager_rope else rope
            q = rotate(b, "q_rope", q, abpe=self.a, shardable=["tokens", *qn])
            kv = rotate(b, "kv_rope", kv, abpe=self.a, shardable=["tokens", *kn])
        if self.shape.kv_write:
            kv_write(
                b, "kv_write", kv, kv.dims, abpe=self.a, kv_bpe=self.kvb, shardable=["tokens", *kn]
            )
        outs = []
        for seg in self.shape.segments:
            Bd, Q, K = ("batch", seg.batch), ("q_seq", seg.q_seq), ("kv_seq", seg.kv_seq)
            qd, kvd = (Bd, Q, *qh, D), (Bd, K, KVd, *kh, D)
            per_head = seg.cached and seg.q_seq == 1 and self.shape.kv_per_query_head
            per_head = per_head and not self.shape.unfused_attention
            group = c.heads // c.kv_heads
            if seg.cached:
                bpe = self.kvb
                if per_head:
                    bpe = kv_reread_bytes(self.kvb, group, self.shape.kv_reread_share)
                kv_in = ("kv_cache", None, kvd, KV, bpe)
            else:
                kv_in = ("kv", self.seg_view(kv, kvd), kvd, IN, self.a)
            flop = 4 * seg.batch * seg.q_seq * seg.kv_seq * c.heads * c.head_dim
            split = "kv_seq" if seg.q_seq == 1 else "q_seq"
            q_in = ("q", self.seg_view(q, qd), qd, IN, self.a)
            if self.shape.unfused_attention:
                outs.append(unfused_attention(self, seg, q_in, kv_in, qh, kh, split))
                continue
            outs.append(
                attention(
                    b,
                    seg.name,
                    [q_in, kv_in],
                    (Bd, Q, *qh, D),
                    flop,
                    abpe=self.a,
                    cls=seg.cls,
                    shardable=["batch", *qn, split],
                    window=seg.window,
                    unsplit_kv=self.shape.kv_unsplit,
                )
            )
            if per_head:
                per_query_head(b, seg.name, group, dims_elements(kvd), self.kvb)
            if c.attn_sinks:
                add_sinks(b, seg.name, qh, self.w)
            self.core.append(seg.name)
        o_in = (T, *qh, D)
        return self.lin(
            "o_proj",
            self.concat(outs, o_in),
            o_in,
            (*qh, D, H),
            (T, H),
            bias=c.o_bias,
            shardable=["tokens", "hidden", *qn],
        )

    # -- MLP and MoE -----------------------------------------------------------------------
    def mlp(self, h: Tensor, prefix: str, width: int, bias: bool) -> Tensor:
        T, H, F = self.T, self.H, ("ffn", width)
        if self.cfg.gated:
            GU = ("gate_up", 2)
            up = self.lin(
                f"{prefix}_gate_up",
                h,
                (T, H),
                (H, GU, F),
                (T, GU, F),
                bias=bias,
                shardable=["tokens", "ffn", "hidden"],
            )
            if self.shape.eager_activation:
                act = eager_gated(
                    self.b, f"{prefix}_act", up, (T, F), abpe=self.a, shardable=["tokens", "ffn"]
                )
            else:
                act = unary(
                    self.b,
                    f"{prefix}_act",
                    up,
                    (T, F),
                    abpe=self.a,
                    flop_per_element=GATED_FLOP,
                    shardable=["tokens", "ffn"],
                )
        else:
            up = self.lin(
                f"{prefix}_up",
                h,
                (T, H),
                (H, F),
                (T, F),
                bias=bias,
                shardable=["tokens", "ffn", "hidden"],
            )
            keep = ["tokens", "ffn"]
            if self.cfg.squared_relu and self.shape.eager_activation:
                act = eager_squared_relu(self.b, f"{prefix}_act", up, abpe=self.a, shardable=keep)
            else:
                act = unary(self.b, f"{prefix}_act", up, abpe=self.a, shardable=keep)
        assert act.dims == (T, F)
        return self.lin(
            f"{prefix}_down",
            act,
            (T, F),
            (F, H),
            (T, H),
            bias=bias,
            shardable=["tokens", "hidden", "ffn"],
        )

    def moe(self, h: Tensor) -> Tensor:
        """Router (GEMM hidden -> experts), top-k, dispatch (all-to-all), experts as batched
        GEMMs over (experts, expert_tokens), combine (all-to-all), plus shared experts.
        Expert GEMM FLOP counts the routed token slots tokens*k (at most experts x capacity);
        the gradient through the routing weights (tiny) is not modelled."""
        b, c, T, H = self.b, self.cfg, self.T, self.H
        ep, k, tokens = self.shape.expert_parallel, c.experts_per_token, self.shape.tokens
        # this rank's experts, each taking its share of the tokens of all EP ranks
        E = ("experts", c.experts // ep)
        C = ("expert_tokens", expert_tokens(tokens * ep, k, c.experts, c.capacity_factor))
        routed = min(tokens * k, E[1] * C[1])
        share = routed_expert_share(tokens * ep, k, c.experts)
        if c.capacity_factor <= 0 and share <= 1.0 - 1.0 / E[1]:  # dropless, not every one
            self.expert_share = share  # an expert no token chose does nothing
        # the router scores every expert; under EP the routing table (T, all experts) is not
        # the local experts dim
        R = ("experts", c.experts) if ep == 1 else ("routes", c.experts)
        if c.router_bias:  # its bias (experts,) is no expert's weight: not the experts dim
            R = ("routes", c.experts)
        route = self.router(h, R)
        # the routed token copies of this graph's tokens, each way: every chip of the TP
        # group sends its share of them to its EP peers (solver.cost.own_network)
        dedup = (c.experts, k) if self.shape.moe_dedup else (0, 0)
        perm = ops_moe.Permutation(
            b, route, (T, H, R, E, C), routed, self.a, self.shape.moe_scatter_add, dedup
        )
        disp = perm.dispatch(h)
        if self.shape.sort_chunks:
            disp = self.sort_chunks("expert_sort", disp)
        down = self.experts(disp, E, C, routed)
        if self.shape.sort_chunks:
            down = self.sort_chunks("expert_unsort", down)
        out = perm.combine(down)
        if c.shared_experts:
            shared = self.mlp(h, "shared", c.moe_ffn * c.shared_experts, c.mlp_bias)
            out = add(b, "moe_sum", out, shared, abpe=self.a)
        return out

    def sort_chunks(self, name: str, x: Tensor) -> Tensor:
        """The all-to-all dispatcher's reorder of the received tokens from (source chip,
        expert) to (expert, source chip) chunks, or back: one read and one write of every
        routed token (Megatron-core's sort_chunks_by_idxs)."""
        shard = ["experts", "expert_tokens"]
        return unary(
            self.b,
            name,
            x,
            abpe=self.a,
            flop_per_element=0,
            kind=KernelKind.ROUTER,
            shardable=shard,
            backward_reads_input=False,
        )

    def router(self, h: Tensor, R: Dim) -> Tensor:
        """Each token's scores over every expert (`R`: a GEMM Megatron keeps in 16-bit),
        then its top-k choice: the routing table dispatch and combine read."""
        T, H = self.T, self.H
        bias = self.cfg.router_bias
        logits = self.lin(
            "router", h, (T, H), (H, R), (T, R), fp8=False, bias=bias, shardable=["tokens"]
        )
        route = self.b.add_kernel(
            "topk",
            KernelKind.ROUTER,
            [Arg("in", IN, (T, R), self.a, logits), Arg("out", OUT, (T, R), self.a)],
            SOFTMAX_FLOP * self.shape.tokens * R[1],
            kernel_class="Va_Va",
            shardable=["tokens"],
            requires_grad=False,
        )
        assert route is not None
        return route

    def experts(self, disp: Tensor, E: Dim, C: Dim, routed: int) -> Tensor:
        """This rank's experts as one MLP of batched GEMMs over (experts, expert_tokens),
        each GEMM's FLOP counted on the `routed` token slots only."""
        c, H, F = self.cfg, self.H, ("ffn", self.cfg.moe_ffn)
        gemm = dict(
            kind=KernelKind.BATCHED_GEMM,
            shardable=["experts", "expert_tokens", "ffn", "hidden"],
            bias=c.expert_bias,  # GPT-OSS: (experts, gate_up, ffn) and (experts, hidden)
        )
        if c.gated:
            GU = ("gate_up", 2)
            up = self.lin(
                "expert_gate_up",
                disp,
                (E, C, H),
                (E, H, GU, F),
                (E, C, GU, F),
                flop=4 * routed * H[1] * F[1],
                **gemm,
            )
            shard = ["experts", "expert_tokens", "ffn"]
            if self.shape.eager_activation:  # act(gate) * up on the chunk's halves, as the MLP
                act = eager_gated(self.b, "expert_act", up, (E, C, F), abpe=self.a, shardable=shard)
            else:
                act = unary(
                    self.b,
                    "expert_act",
                    up,
                    (E, C, F),
                    abpe=self.a,
                    flop_per_element=GATED_FLOP,
                    shardable=shard,
                )
        else:
            up = self.lin(
                "expert_up",
                disp,
                (E, C, H),
                (E, H, F),
                (E, C, F),
                flop=2 * routed * H[1] * F[1],
                **gemm,
            )
            act = unary(
                self.b, "expert_act", up, abpe=self.a, shardable=["experts", "expert_tokens", "ffn"]
            )
        return self.lin(
            "expert_down",
            act,
            (E, C, F),
            (E, F, H),
            (E, C, H),
            flop=2 * routed * H[1] * F[1],
            **gemm,
        )
