"""LLM training (LlmTraining): one optimizer step as layer and head phases.

Phase `layer` (count = num_layers): forward, recompute copies, activation gradients and
weight gradients of one layer for one micro-batch (micro_batch sequences x seq_len tokens).
Phase `embed` (role "embed", count 1): token/position embedding and its weight gradient (on
the first pipeline stage). Phase `head` (role "head", count 1): final norm, LM head (tokens x
hidden x vocab), cross-entropy loss, and their backward (on the last stage). A tied embedding
(one table for both) stays in `head`. The solver multiplies by the micro-batches per step
(global_batch / (micro_batch x data-parallel degree)).

GEMM FLOP per micro-batch, closed forms (b = micro_batch, s = seq_len, l = layers,
h = hidden, V = vocab, T = b s, N_gemm = GEMM weight parameters incl. the LM head):
  no recompute: 6 N_gemm T + 12 l h s^2 b  (attention non-causal, backward = 2x forward)
  full recompute: Megatron (Narayanan et al. 2021, eq. 3) per micro-batch:
      96 b s l h^2 (1 + s / (6 h) + V / (16 l h))
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from generator.graph import KernelGraph, Phase, Workload
from generator.llm_attention import AttnSegment
from generator.llm_common import (
    check_positions,
    embed_graph,
    head_graph,
    layer_phases,
    model_info,
)
from generator.llm_layer import LayerShape
from generator.models import ModelConfig
from generator.moe_layout import (
    MOE_DISPATCHERS,
    expert_layouts,
    expert_note,
    pin_expert_layout,
    sorts_chunks,
)
from generator.precision import Precision
from schema import setup_pb2
from schema.errors import SetupError

# LlmTraining.master_grad_cast: the cast reads the g-byte gradient and writes 4 bytes, and
# the update then reads those 4 bytes instead of g: g + 4 + (4 - g) = 8 per parameter
MASTER_GRAD_CAST_BYTES = 8.0
TORCH_GROUPED = setup_pb2.MOE_GEMM_TORCH_GROUPED
RECOMPUTE = {
    setup_pb2.RECOMPUTE_NONE: "none",
    setup_pb2.RECOMPUTE_SELECTIVE: "selective",
    setup_pb2.RECOMPUTE_FULL: "full",
}
# LlmTraining.dp_overlap -> Workload.dp_overlap, and the note a plan that does not overlap
# every DP collective carries
DP_OVERLAP = {
    setup_pb2.DP_OVERLAP_ALL: "all",
    setup_pb2.DP_OVERLAP_GRAD_REDUCE: "grad_reduce",
    setup_pb2.DP_OVERLAP_NONE: "none",
}
DP_OVERLAP_NOTES = {
    setup_pb2.DP_OVERLAP_GRAD_REDUCE: "ZeRO parameter all-gather after the optimizer step, "
    "not overlapped (gradient reduction overlapped with the backward)",
    setup_pb2.DP_OVERLAP_NONE: "data-parallel collectives not overlapped: the gradient "
    "reduction after the last backward, the parameter all-gather after the step",
}


def check_training(req: setup_pb2.LlmTraining, path: Path) -> None:
    where = f"{path}: workload.llm_training"
    p = []
    if req.seq_len <= 0:
        p.append(f"{where}.seq_len must be > 0 tokens, got {req.seq_len}")
    if req.global_batch <= 0:
        p.append(f"{where}.global_batch must be > 0 sequences, got {req.global_batch}")
    if req.micro_batch < 0:
        p.append(f"{where}.micro_batch must be >= 0 (0 = searched), got {req.micro_batch}")
    elif req.global_batch > 0 and req.micro_batch > req.global_batch:
        p.append(f"{where}.micro_batch {req.micro_batch} exceeds global_batch {req.global_batch}")
    if not 0 <= req.dropout < 1:
        p.append(f"{where}.dropout must be a probability in [0, 1), got {req.dropout}")
    if not 0 <= req.zero_stage <= 3:
        p.append(f"{where}.zero_stage must be 0, 1, 2 or 3, got {req.zero_stage}")
    if req.context_parallel < 0:
        p.append(f"{where}.context_parallel must be >= 0 (0 = 1), got {req.context_parallel}")
    elif req.context_parallel > 1 and req.seq_len > 0 and req.seq_len % req.context_parallel:
        p.append(
            f"{where}.context_parallel {req.context_parallel} must divide seq_len "
            f"{req.seq_len} (each rank holds seq_len / CP tokens); valid: "
            f"{_divisors(req.seq_len, req.context_parallel)}"
        )
    if req.virtual_pipeline < 0:
        p.append(f"{where}.virtual_pipeline must be >= 0 (0 = 1), got {req.virtual_pipeline}")
    if req.expert_parallel < 0:
        p.append(
            f"{where}.expert_parallel must be >= 0 (0 = searched for an MoE model), "
            f"got {req.expert_parallel}"
        )
    if req.expert_tensor_parallel < 0:
        p.append(
            f"{where}.expert_tensor_parallel must be >= 0 (0 = searched, 1, or the TP "
            f"degree), got {req.expert_tensor_parallel}"
        )
    if p:
        raise SetupError(p)


def check_expert_parallel(req: setup_pb2.LlmTraining, cfg: ModelConfig, path: Path) -> None:
    """EP splits the routed experts: the model needs them, in a number EP divides."""
    ep = req.expert_parallel
    if ep <= 1:
        return
    where = f"{path}: workload.llm_training.expert_parallel {ep}"
    if cfg.experts <= 0:
        raise SetupError(f"{where} needs a mixture-of-experts model; {cfg.name} has no experts")
    if cfg.experts % ep:
        raise SetupError(
            f"{where} must divide the model's {cfg.experts} experts (each rank holds experts "
            f"/ EP); valid: {_divisors(cfg.experts, ep)}"
        )


MODEL_PARALLEL_DIMS = ("heads", "kv_heads", "ffn", "experts", "vocab")


def _replicated_vector_kernels(graph: KernelGraph) -> KernelGraph:
    """Without sequence parallelism, norms, residual adds and dropouts run whole on every
    chip of the TP group (Megatron-LM before sequence parallelism): a vector kernel may split
    only along a model-parallel dim (heads, ffn, ...), never along tokens or hidden. With
    `sequence_parallel: true` the search may split them (on tokens, at 1/TP of the work)."""
    kernels = []
    for k in graph.kernels:
        if not k.kind.uses_matrix_unit:
            allowed = k.shardable_dims or tuple(d for d, _ in k.dims)
            keep = tuple(d for d in allowed if d in MODEL_PARALLEL_DIMS)
            k = replace(k, shardable_dims=keep) if keep else replace(k, pinned_sharding="none")
        kernels.append(k)
    return replace(graph, kernels=tuple(kernels))


def searched_knobs(req: setup_pb2.LlmTraining) -> tuple[str, ...]:
    """The training knobs the setup leaves to the outer search (graph.TRAINING_KNOBS): a
    micro-batch of 0, and a recompute mode, ZeRO stage or interleaving depth not given (an
    interleaving depth of 0 too). A value given pins the knob, as a topology degree does."""
    searched = []
    if req.micro_batch <= 0:
        searched.append("micro_batch")
    if not req.HasField("recompute"):
        searched.append("recompute")
    if not req.HasField("zero_stage"):
        searched.append("zero_stage")
    if req.virtual_pipeline <= 0:
        searched.append("virtual_pipeline")
    return tuple(searched)


def micro_batch_sizes(global_batch: int) -> tuple[int, ...]:
    """Micro-batch sizes the outer search tries: every divisor of the global batch (the
    search keeps those that also divide global_batch / DP, Megatron-LM's rule)."""
    return tuple(d for d in range(1, global_batch + 1) if global_batch % d == 0)


def training_workload(
    req: setup_pb2.LlmTraining, cfg: ModelConfig, prec: Precision, path: Path, num_chips: int = 1
) -> Workload:
    """The workload; with the micro-batch, recompute mode or EP degree searched, one pinned
    variant per (micro-batch, recompute, EP) rides along in `variants` (graph.Workload).
    `num_chips`: the system's, which bounds the EP degrees searched."""
    check_training(req, path)
    check_positions(cfg, req.seq_len, f"{path}: workload.llm_training.seq_len {req.seq_len}")
    check_expert_parallel(req, cfg, path)
    if req.virtual_pipeline > cfg.layers:
        raise SetupError(
            f"{path}: workload.llm_training.virtual_pipeline {req.virtual_pipeline} exceeds the "
            f"model's {cfg.layers} layers; each virtual stage holds at least one layer"
        )
    searched = searched_knobs(req)
    layouts = expert_layouts(req, cfg, num_chips)
    if len({g for g, _ in layouts}) > 1:
        searched = (*searched, "expert_parallel")
    if len({fold for _, fold in layouts}) > 1:
        searched = (*searched, "expert_tensor_parallel")
    sizes = micro_batch_sizes(req.global_batch) if "micro_batch" in searched else (req.micro_batch,)
    modes = tuple(RECOMPUTE.values()) if "recompute" in searched else (RECOMPUTE[req.recompute],)
    variants = tuple(
        _pinned_workload(req, cfg, prec, mb, mode, searched, ep, fold)
        for mb in sizes
        for mode in modes
        for ep, fold in layouts
    )
    if len(variants) == 1:
        return variants[0]
    return replace(variants[0], variants=variants)


def _pinned_workload(
    req: setup_pb2.LlmTraining,
    cfg: ModelConfig,
    prec: Precision,
    mb: int,
    recompute: str,
    searched: tuple[str, ...],
    ep: int = 1,
    fold: bool = False,
) -> Workload:
    """The workload at one micro-batch size, recompute mode and expert layout (EP TP groups,
    folded over TP or not: generator.moe_layout); ZeRO stage and interleaving depth are
    plain numbers the solver sets per candidate."""
    cp = max(req.context_parallel, 1)
    shape = _layer_shape(req, cfg, prec, mb, ep, fold)
    layers = layer_phases("layer", cfg, shape, prec, training=True, recompute=recompute)
    if not req.sequence_parallel:
        layers = tuple(replace(p, graph=_replicated_vector_kernels(p.graph)) for p in layers)
    if cfg.experts > 0:
        layers = tuple(replace(p, graph=pin_expert_layout(p.graph, fold)) for p in layers)
    edges = _edge_phases(req, cfg, prec, rank_tokens=mb * req.seq_len // cp)
    return Workload(
        kind="training",
        phases=(*layers, *edges),
        model=model_info(cfg, layers, edges, prec, ep),
        global_batch=req.global_batch,
        micro_batch=mb,
        seq_len=req.seq_len,
        recompute=recompute,
        sequence_parallel=req.sequence_parallel,
        zero_stage=req.zero_stage,
        virtual_pipeline=req.virtual_pipeline or 1,
        edges_in_pipeline_split=req.edges_in_pipeline_split,
        searched=searched,
        context_parallel=cp,
        expert_parallel=ep,
        expert_tensor_parallel=1 if fold else req.expert_tensor_parallel,
        expert_parallel_group=req.expert_parallel,
        moe_dispatcher=MOE_DISPATCHERS[req.moe_dispatcher],
        fp8_param_gather=req.fp8_param_gather and prec.math == "FP8",
        grad_reduce_fp32=req.grad_reduce_fp32,
        dp_overlap=DP_OVERLAP[req.dp_overlap],
        backward_reads_wired=True,
        weight_bytes_per_param=prec.weight_bytes,
        optimizer_bytes_per_param=prec.optimizer_bytes_per_param,
        grad_cast_bytes_per_param=MASTER_GRAD_CAST_BYTES if req.master_grad_cast else 0.0,
        activation_bytes_per_element=prec.activation_bytes,
        kv_bytes_per_element=prec.kv_bytes,
        compute_dtype=prec.math,
        notes=_notes(req, cfg, prec, mb, searched, ep, fold),
    )


def _layer_shape(
    req: setup_pb2.LlmTraining, cfg: ModelConfig, prec: Precision, mb: int, ep: int, fold: bool
) -> LayerShape:
    """One layer on one context-parallel rank: s / CP query tokens of each of the mb
    sequences against all s keys (the ring brings every K/V block)."""
    s, cp = req.seq_len, max(req.context_parallel, 1)
    return LayerShape(
        tokens=mb * s // cp,
        segments=(AttnSegment("attention", mb, s // cp, s, cached=False, cls="Ma_Mqa"),),
        gemm_cls="Ma_Mw",
        unfused_attention=req.attention == setup_pb2.UNFUSED_ATTENTION,
        dropout=req.dropout > 0,
        fp8_casts=prec.math == "FP8",
        eager_activation=req.eager_activation,
        # rotary positions unless the model has a learned table (MLA's decoupled rope
        # slice, generator/llm_mla.py, is not charged a rotation kernel)
        rope=cfg.positions == 0 and not cfg.is_mla,
        eager_rope=req.eager_rope,
        expert_parallel=ep,
        sort_chunks=sorts_chunks(req, cfg, ep, fold),
        # Transformer Engine's default: a GEMM per expert
        fused_experts=req.moe_gemm in (setup_pb2.MOE_GEMM_GROUPED, TORCH_GROUPED),
        torch_grouped=req.moe_gemm == TORCH_GROUPED,
        # Megatron-core: moe_permute_fusion off unless the recipe sets it
        moe_scatter_add=req.moe_permute != setup_pb2.MOE_PERMUTE_FUSED,
        moe_dedup=req.moe_dispatcher == setup_pb2.MOE_DISPATCHER_DEEPEP,
    )


def _edge_phases(
    req: setup_pb2.LlmTraining, cfg: ModelConfig, prec: Precision, rank_tokens: int
) -> tuple[Phase, ...]:
    """The model's ends: untied, the embedding on the first pipeline stage and the LM head
    with the loss on the last; a tied table is one weight, so one graph (`head`)."""
    apart = not cfg.tie_embeddings
    head = Phase(
        "head",
        head_graph(
            "head",
            cfg,
            prec,
            embed_tokens=rank_tokens,
            head_tokens=rank_tokens,
            training=True,
            loss=req.loss,
            embedding=not apart,
        ),
        role="head",
    )
    if not apart:
        return (head,)
    embed = embed_graph("embed", cfg, prec, tokens=rank_tokens)
    return (Phase("embed", embed, role="embed"), head)


def _notes(
    req: setup_pb2.LlmTraining,
    cfg: ModelConfig,
    prec: Precision,
    mb: int,
    searched: tuple[str, ...],
    ep: int,
    fold: bool = False,
) -> tuple[str, ...]:
    """What the graphs stand for and each option that changed them, in words (the report
    prints them beside the plan)."""
    s, cp = req.seq_len, max(req.context_parallel, 1)
    notes = [
        f"micro-batch of {mb} x {s} tokens per graph instance; the step runs "
        f"global_batch / (micro_batch x DP) micro-batches per data-parallel rank"
    ]
    if cp > 1:
        notes.append(
            f"context parallel {cp}: {s // cp} of the {s} tokens per rank, K/V blocks passed "
            "around the CP ring (ring attention)"
        )
    if ep > 1 or (fold and cfg.experts > 0):
        notes.append(expert_note(cfg.experts, ep, fold, MOE_DISPATCHERS[req.moe_dispatcher]))
    if req.sequence_parallel:
        notes.append("sequence parallel: norms/residuals split on tokens across the TP group")
    if req.attention == setup_pb2.UNFUSED_ATTENTION:
        notes.append("unfused attention: QK^T, softmax, dropout and AV through DRAM")
    if prec.math == "FP8":
        notes.append(
            "FP8 linear layers: each 16-bit input and output gradient cast to FP8 by amax + "
            "cast-transpose kernels (6 bytes per element; Transformer Engine current scaling)"
        )
    if req.fp8_param_gather and prec.math == "FP8":
        notes.append(
            "FP8 parameter all-gather: the FP8 GEMM weights gathered at 1 byte, cast on each "
            "rank's shard after the update, transposed once per gather"
        )
    if req.grad_reduce_fp32:
        notes.append("gradients reduced over the data-parallel ranks in FP32 (4 bytes each)")
    if req.dp_overlap != setup_pb2.DP_OVERLAP_ALL:
        notes.append(DP_OVERLAP_NOTES[req.dp_overlap])
    if req.dropout > 0:
        notes.append(f"dropout {req.dropout:g}: 1-byte keep masks written and read back")
    if req.eager_activation and cfg.squared_relu:
        notes.append("squared ReLU as eager ops: relu, pow; four backward kernels")
    if req.eager_rope and cfg.positions == 0 and not cfg.is_mla:
        notes.append("RoPE as eager ops: five kernels forward, five backward per tensor")
    if req.master_grad_cast:
        notes.append("gradients cast to FP32 before the update: 8 bytes per parameter more")
    if req.loss == setup_pb2.LOSS_FUSED:
        notes.append("fused cross-entropy: one online-softmax kernel pair, in place")
    if searched:
        notes.append("searched by the outer search: " + ", ".join(searched))
    return tuple(notes)


def _divisors(size: int, near: int) -> str:
    """The degrees that split `size` evenly, as words (those up to 4 x `near` when many)."""
    found = [d for d in range(1, size + 1) if size % d == 0]
    shown = [d for d in found if d <= 4 * near] if len(found) > 12 else found
    more = ", ..." if len(shown) < len(found) else ""
    return ", ".join(map(str, shown)) + more
