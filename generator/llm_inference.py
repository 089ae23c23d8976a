"""LLM inference (LlmInference): prefill, decode, chunked prefill, or a whole request.

Phases (layer graphs have count = num_layers; heads have role "head"):
- PREFILL: `prefill` (batch x input_len tokens, attention over the prompt, KV write of every
  token) and `prefill_head` (embedding of every token; final norm + LM head only on the last
  token of each sequence).
  With `prefill_tokens_per_pass` the batch is prefilled in passes of whole sequences
  (prefill_passes): the phases run once per pass (steps = passes).
- DECODE: one step: `decode` (batch x 1 token, attention over context_len cached tokens,
  context_len 0 = input_len; KV write of the new token) and `decode_head`.
- CHUNKED_PREFILL: one Sarathi-style scheduler step: the GEMMs run over chunk_size prefill
  tokens + decode_batch decode tokens together; attention is two kernels, one for the prefill
  chunk and one for the decode tokens (each at context_len). The chunk is the first chunk of
  its prompt when input_len <= chunk_size (it attends to itself); when input_len is larger
  it is the prompt's last chunk: it attends to all input_len tokens, the first
  input_len - chunk_size of them read from the KV cache. With prefill_sequences n > 1 the
  chunk is n whole prompts of chunk_size / n tokens, each attending to itself. The LM head
  runs on the decode tokens and on each prompt's last token.
- REQUEST: `prefill` + `prefill_head`, then `decode` + `decode_head` with steps =
  output_len - 1 at the mean context input_len + output_len / 2. Decode step j attends to
  input_len + j keys; attention cost is linear in the context, so steps x mean context
  equals the exact sum (exact for even output_len; odd rounds the mean up by half a token).

Attention FLOP is the non-causal 4 b s_q s_kv heads head_dim (Megatron convention).
`attention: UNFUSED_ATTENTION` runs it as QK^T, softmax and AV kernels with the scores in
DRAM (plain PyTorch); MLA attention is always fused.
Decode attention's kernel family (`decode_attention`, setup.proto DecodeAttention): the
default KV_SHARED is group-aware (XQA, FlashInfer, FlashDecoding): each KV head is read from
DRAM once per step, G query heads per KV head computed together on the matrix unit.
KV_SHARED_UNSPLIT is group-aware with no KV split (PyTorch's SDPA flash kernel): a thread
block per (sequence, KV head) over the whole cache, so at small batch few SMs stream it
(kernel_times.unsplit_decode_time). KV_PER_QUERY_HEAD is a thread block per query head on
the vector unit (TensorRT-LLM's masked-MHA kernel before XQA, vLLM's paged_attention):
each KV head is still read from DRAM once (the L2 serves the group's G - 1 repeats;
`kv_reread_dram_share` of them miss it), its FLOP run at the vector peak (FP32 FMAs), and
an 8-bit cache is converted once per element per query head
(generator/ops_attention.per_query_head). Per decode step and layer the cache read is
  2 kv_heads head_dim bytes x sum over sequences of the KV length,
the KV length rounded up to whole pages of `kv_page_tokens` (a paged cache is read in
pages); a REQUEST's decode steps take the mean of the rounded lengths over its steps.
`tensor_parallel_split: MODEL_DIMS_SPLIT` lets the tensor-parallel group split a kernel only
along model dims (ENGINE_TP_DIMS) and runs the rest whole on every chip: an engine's
column-parallel QKV / gate-up and row-parallel output / down projections (with their
all-reduce), head-split attention, replicated norms and residual adds; the default leaves
every loop dim to the search.
`request_overhead_us` is the runtime's host time per generate call, added once to the time
to first token and the end-to-end latency of PREFILL and REQUEST (not to one decode or
chunked-prefill step).
KV-cache bytes: 2 layers kv_heads head_dim context bytes batch (MLA: layers (kv_lora_rank +
qk_rope_head_dim) context bytes batch); Workload.kv_cache_bytes is taken at the longest
context any step attends to.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from generator.graph import KernelGraph, KernelKind, OperandRole, Phase, Workload
from generator.llm_attention import AttnSegment
from generator.llm_common import (
    check_positions,
    head_graph,
    layer_phases,
    model_info,
    window_keys,
)
from generator.llm_layer import LayerShape
from generator.models import ModelConfig
from generator.precision import Precision
from generator.requests import request_batch
from schema import setup_pb2
from schema.errors import SetupError

PHASE = {
    setup_pb2.REQUEST: "request",
    setup_pb2.PREFILL: "prefill",
    setup_pb2.DECODE: "decode",
    setup_pb2.CHUNKED_PREFILL: "chunked_prefill",
}


# Phases that are one whole generate call of the runtime (request_overhead_us applies).
ONE_CALL = ("prefill", "request")


def check_inference(req: setup_pb2.LlmInference, path: Path) -> None:
    where = f"{path}: workload.llm_inference"
    p = []
    fields = (
        "batch",
        "input_len",
        "output_len",
        "context_len",
        "chunk_size",
        "decode_batch",
        "prefill_tokens_per_pass",
    )
    for field in fields:
        if getattr(req, field) < 0:
            p.append(f"{where}.{field} must be >= 0, got {getattr(req, field)}")
    if req.phase in (setup_pb2.PREFILL, setup_pb2.REQUEST) and req.input_len <= 0:
        p.append(f"{where}.input_len must be > 0 tokens for phase {PHASE[req.phase].upper()}")
    if not 0 <= req.kv_reread_dram_share <= 1:
        p.append(
            f"{where}.kv_reread_dram_share must be in [0, 1] (0 = unset: the L2 serves "
            f"every repeated read), got {req.kv_reread_dram_share:g}"
        )
    if req.kv_page_tokens < 0:
        p.append(f"{where}.kv_page_tokens must be >= 0 (0 = contiguous), got {req.kv_page_tokens}")
    if req.request_overhead_us < 0:
        p.append(f"{where}.request_overhead_us must be >= 0 us, got {req.request_overhead_us:g}")
    if req.phase == setup_pb2.REQUEST and req.output_len <= 0:
        p.append(f"{where}.output_len must be > 0 tokens for phase REQUEST")
    if req.phase == setup_pb2.DECODE and req.context_len <= 0 and req.input_len <= 0:
        p.append(f"{where}: phase DECODE needs context_len (or input_len) > 0 tokens")
    if req.phase == setup_pb2.CHUNKED_PREFILL:
        if req.chunk_size <= 0:
            p.append(f"{where}.chunk_size must be > 0 tokens for phase CHUNKED_PREFILL")
        if req.decode_batch > 0 and req.context_len <= 0 and req.input_len <= 0:
            p.append(f"{where}: decode_batch > 0 needs context_len (or input_len) > 0")
    if p:
        raise SetupError(p)


# The loop dims a serving engine's tensor parallelism splits (Megatron-LM's layout as
# TensorRT-LLM and vLLM implement it): attention heads (query heads within a KV group when
# the KV heads are fewer than the TP degree), the MLP width, experts and the vocabulary.
ENGINE_TP_DIMS = ("heads", "kv_heads", "group", "ffn", "experts", "vocab")


def model_dims_split(graph: KernelGraph) -> KernelGraph:
    """Every kernel may split only along ENGINE_TP_DIMS; one without such a dim (a norm, a
    residual add) is pinned replicated: it runs whole on every chip of the TP group. A
    linear layer, and attention, must split when it can (engines never replicate a linear
    layer's weights over the TP group); the embedding table may stay whole (TensorRT-LLM's
    default) or split over the vocabulary."""
    kernels = []
    for k in graph.kernels:
        allowed = k.shardable_dims or tuple(d for d, _ in k.dims)
        keep = tuple(d for d in allowed if d in ENGINE_TP_DIMS)
        if not keep:
            k = replace(k, pinned_sharding="none")
        else:
            weights = k.bytes_by_role(OperandRole.WEIGHT) > 0 and k.kind != KernelKind.EMBEDDING
            split = k.kind == KernelKind.ATTENTION or weights
            k = replace(k, shardable_dims=keep, must_split=split)
        kernels.append(k)
    return replace(graph, kernels=tuple(kernels))


def prefill_passes(batch: int, input_len: int, tokens_per_pass: int) -> tuple[int, int]:
    """(sequences per pass, passes) of a batch's prefill under a token budget per forward
    pass (0 = no budget: one pass). Whole sequences per pass, at least one; the passes are
    balanced (ceil(batch / passes) each), so the last pass is never a small remainder."""
    if tokens_per_pass <= 0 or batch * input_len <= tokens_per_pass:
        return batch, 1
    most = max(1, tokens_per_pass // input_len)
    passes = -(-batch // most)
    return -(-batch // passes), passes


def _prefill_shape(batch: int, length: int) -> LayerShape:
    seg = AttnSegment("attention", batch, length, length, cached=False, cls="Ma_Mqa")
    return LayerShape(batch * length, (seg,), "Ma_Mw", kv_write=True)


def paged_len(context: int, page_tokens: int) -> int:
    """KV tokens a decode step reads for one sequence: its context in whole pages."""
    if page_tokens <= 0:
        return context
    return -(-context // page_tokens) * page_tokens


def mean_paged_len(first: int, last: int, page_tokens: int) -> int:
    """The mean over decode steps attending to first..last keys of the paged length,
    rounded up (contiguous: first + last over 2, rounded up)."""
    if page_tokens <= 0:
        return -(-(first + last) // 2)
    total = sum(paged_len(c, page_tokens) for c in range(first, last + 1))
    return -(-total // (last - first + 1))


def _decode_shape(batch: int, context: int) -> LayerShape:
    seg = AttnSegment("attention", batch, 1, context, cached=True, cls="Va_Mqa")
    return LayerShape(batch, (seg,), "Va_Mw", kv_write=True, absorbed=True)


class _Part(NamedTuple):
    """The layer phases and head phase of one part of an inference workload (a prefill, a
    run of decode steps, a chunked-prefill step), and what it adds to the bookkeeping."""

    layers: list[Phase]
    head: Phase
    kv_tokens: int  # cached tokens (all sequences) at the longest context it attends to
    extra: dict[str, int]  # Workload fields it sets (context_len, chunk_size, ...)
    notes: list[str]
    # ... of a sliding-window layer, which keeps only its window (-1 = kv_tokens)
    kv_window_tokens: int = -1


# Phases whose batch replicas of the model can share (a chunked-prefill step is one
# scheduler's step: its chunk and decode tokens are not a batch to split)
REPLICATED_PHASES = ("prefill", "decode", "request")


def replica_counts(req: setup_pb2.LlmInference, num_chips: int) -> tuple[int, ...]:
    """Replicas of the model (data parallelism) the outer search tries: every r dividing
    both the batch (each replica serves batch / r sequences) and the chips."""
    if PHASE[req.phase] not in REPLICATED_PHASES:
        return (1,)
    batch = request_batch(req)
    return tuple(r for r in range(1, batch + 1) if batch % r == 0 and num_chips % r == 0)


def inference_workload(
    req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, path: Path, num_chips: int = 1
) -> Workload:
    """The workload of one replica of the model serving the whole batch; with more replicas
    possible (`replica_counts` on `num_chips` chips), one variant per replica count rides
    along in `variants` (graph.Workload.replicas): its graphs serve batch / r sequences,
    its `batch` stays the whole batch (throughput counts every replica)."""
    check_inference(req, path)
    phase = f"{path}: workload.llm_inference phase {PHASE[req.phase].upper()}"
    check_positions(cfg, longest_position(req), phase)
    counts = replica_counts(req, num_chips)
    if len(counts) == 1:
        return _replica(req, cfg, prec, path)
    variants = []
    for r in counts:
        part = setup_pb2.LlmInference()
        part.CopyFrom(req)
        part.batch = request_batch(req) // r
        w = _replica(part, cfg, prec, path)
        notes = w.notes
        if r > 1:
            notes = (f"{r} replicas of the model, each serving {part.batch} sequences", *notes)
        variants.append(
            replace(w, batch=request_batch(req), replicas=r, searched=("replicas",), notes=notes)
        )
    return replace(variants[0], variants=tuple(variants))


def longest_position(req: setup_pb2.LlmInference) -> int:
    """The most positions a sequence of the phase occupies: the prompt (PREFILL), the
    context a step attends to, its own token counted in it (DECODE, CHUNKED_PREFILL), the
    prompt and every generated token fed back (REQUEST: input_len + output_len - 1)."""
    if req.phase == setup_pb2.PREFILL:
        return req.input_len
    if req.phase == setup_pb2.REQUEST:
        return req.input_len + req.output_len - 1
    return req.context_len or req.input_len


# Replica workloads already built in this process, by value (see `_replica`).
_REPLICAS: OrderedDict[tuple[bytes, ModelConfig, Precision, str], Workload] = OrderedDict()
_REPLICAS_SIZE = 64  # a sweep's (batch / replicas, lengths) combinations: a few dozen


def _replica(
    req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, path: Path
) -> Workload:
    """The phase's parts in the order a request runs them (prefill, then decode); the
    model's weights are counted once, on the first part. Kept per process (bounded, least
    recently used first out) under the request's serialized bytes, the model, the precision
    and the path: everything `_build_replica` reads, compared by value. Why: a sweep's points
    (and a point's replica counts) ask for the same replica again and again (batch 8 on two
    replicas is batch 4 on one); the workload is frozen, so sharing it changes nothing, and
    graphs shared across points let per-graph caches (KernelGraph.canonical_order) hit."""
    key = (req.SerializeToString(deterministic=True), cfg, prec, str(path))
    hit = _REPLICAS.get(key)
    if hit is not None:
        _REPLICAS.move_to_end(key)
        return hit
    workload = _build_replica(req, cfg, prec, path)
    _REPLICAS[key] = workload
    while len(_REPLICAS) > _REPLICAS_SIZE:
        _REPLICAS.popitem(last=False)
    return workload


def _build_replica(
    req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, path: Path
) -> Workload:
    """`_replica` computed."""
    batch, ilen, olen = request_batch(req), req.input_len, req.output_len
    kind = PHASE[req.phase]
    parts: list[_Part] = []
    if kind in ("prefill", "request"):
        parts.append(_prefill(req, cfg, prec, batch))
    if kind == "decode":
        parts.append(_decode(req, cfg, prec, batch))
    if kind == "request" and olen > 1:
        parts.append(_request_decode(req, cfg, prec, batch))
    if kind == "chunked_prefill":
        parts.append(_chunked_prefill(req, cfg, prec))
    extra: dict[str, int] = {}
    notes: list[str] = []
    for part in parts:
        extra.update(part.extra)
        notes.extend(part.notes)
    if req.attention == setup_pb2.UNFUSED_ATTENTION and not cfg.is_mla:
        notes.append("unfused attention: QK^T, softmax and AV through DRAM")
    kv_per_layer_token = cfg.kv_elements_per_token_per_layer() * prec.kv_bytes
    last = parts[-1]
    sliding = cfg.windowed_layers
    windowed = last.kv_tokens if last.kv_window_tokens < 0 else last.kv_window_tokens
    if sliding:
        notes.append(
            f"sliding-window attention: {sliding} of {cfg.layers} layers attend to the last "
            f"{cfg.sliding_window} keys and keep only those in the KV cache"
        )
    kv_bytes = kv_per_layer_token * ((cfg.layers - sliding) * last.kv_tokens + sliding * windowed)
    return Workload(
        kind="inference",
        phases=tuple(p for part in parts for p in (*part.layers, part.head)),
        model=model_info(cfg, parts[0].layers, (parts[0].head,), prec),
        phase=kind,
        batch=batch,
        input_len=ilen,
        output_len=olen,
        seq_len=ilen,
        kv_cache_bytes=kv_bytes,
        weight_bytes_per_param=prec.weight_bytes,
        optimizer_bytes_per_param=0.0,
        activation_bytes_per_element=prec.activation_bytes,
        kv_bytes_per_element=prec.kv_bytes,
        compute_dtype=prec.math,
        request_overhead_s=req.request_overhead_us * 1e-6 if kind in ONE_CALL else 0.0,
        notes=tuple(notes),
        **extra,
    )


def _phases(
    req: setup_pb2.LlmInference,
    cfg: ModelConfig,
    prec: Precision,
    base: str,
    shape: LayerShape,
    tokens: tuple[int, int],
    cls: str,
    steps: int = 1,
    window_shape: LayerShape | None = None,
) -> tuple[list[Phase], Phase]:
    """The layer phases and the head phase (`tokens`: embedded, through the LM head) of one
    part, with the request's attention options and, under MODEL_DIMS_SPLIT, the engine's
    tensor-parallel layout."""
    shape = replace(
        shape,
        unfused_attention=req.attention == setup_pb2.UNFUSED_ATTENTION,
        kv_per_query_head=req.decode_attention == setup_pb2.KV_PER_QUERY_HEAD,
        kv_unsplit=req.decode_attention == setup_pb2.KV_SHARED_UNSPLIT,
        fused_experts=req.moe_gemm != setup_pb2.MOE_GEMM_PER_EXPERT,  # engines: grouped
        torch_grouped=req.moe_gemm == setup_pb2.MOE_GEMM_TORCH_GROUPED,
        moe_scatter_add=req.moe_permute == setup_pb2.MOE_PERMUTE_SCATTER_ADD,  # engines: fused
        kv_reread_share=req.kv_reread_dram_share,
        eager_activation=req.eager_activation,
        # engines fuse RoPE into their QKV preprocessing; plain PyTorch runs it eagerly
        rope=req.eager_rope and cfg.positions == 0 and not cfg.is_mla,
        eager_rope=req.eager_rope,
    )
    if window_shape is not None:
        window_shape = replace(shape, segments=window_shape.segments)
    layers = layer_phases(base, cfg, shape, prec, steps=steps, window_shape=window_shape)
    split = req.tensor_parallel_split == setup_pb2.MODEL_DIMS_SPLIT
    if split:
        layers = [replace(p, graph=model_dims_split(p.graph)) for p in layers]
    graph = _head(base, cfg, prec, tokens, cls, split)
    return layers, Phase(f"{base}_head", graph, steps=steps, role="head")


# Head graphs already built in this process, by value (see `_head`).
_HeadKey = tuple[str, ModelConfig, Precision, tuple[int, int], str, bool]
_HEADS: OrderedDict[_HeadKey, KernelGraph] = OrderedDict()
_HEADS_SIZE = 64


def _head(
    base: str, cfg: ModelConfig, prec: Precision, tokens: tuple[int, int], cls: str, split: bool
) -> KernelGraph:
    """The head graph of a part (`tokens`: embedded, through the LM head; `split`: under
    MODEL_DIMS_SPLIT), kept per process (bounded, least recently used first out) under
    every argument, by value. Why: a decode step's head depends on the batch alone, so the
    points of a sweep over lengths share one graph object (frozen), and the solver's caches
    of a graph's problem (solver.search.phase_problem) find it again."""
    key = (base, cfg, prec, tokens, cls, split)
    hit = _HEADS.get(key)
    if hit is not None:
        _HEADS.move_to_end(key)
        return hit
    embed, head = tokens
    graph = head_graph(f"{base}_head", cfg, prec, embed_tokens=embed, head_tokens=head, cls=cls)
    if split:
        graph = model_dims_split(graph)
    _HEADS[key] = graph
    while len(_HEADS) > _HEADS_SIZE:
        _HEADS.popitem(last=False)
    return graph


def _prefill(req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, batch: int) -> _Part:
    """The prompts of the batch, in passes of whole sequences under a token budget; the LM
    head runs on each sequence's last token."""
    ilen = req.input_len
    seqs, passes = prefill_passes(batch, ilen, req.prefill_tokens_per_pass)
    shape = _prefill_shape(seqs, ilen)
    layers, head = _phases(req, cfg, prec, "prefill", shape, (seqs * ilen, seqs), "Va_Mw", passes)
    notes: list[str] = []
    if passes > 1:
        notes.append(
            f"prefill: {passes} passes of {seqs} sequences ({seqs * ilen} tokens; "
            f"prefill_tokens_per_pass {req.prefill_tokens_per_pass})"
        )
    kept = batch * window_keys(ilen, cfg.sliding_window)
    return _Part(layers, head, batch * ilen, {}, notes, kept)


def _decode(req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, batch: int) -> _Part:
    """One decode step of the batch at context_len (0 = input_len), in whole pages."""
    ctx = paged_len(req.context_len or req.input_len, req.kv_page_tokens)
    layers, head = _phases(
        req, cfg, prec, "decode", _decode_shape(batch, ctx), (batch, batch), "Va_Mw"
    )
    kept = batch * window_keys(ctx, cfg.sliding_window)
    return _Part(layers, head, batch * ctx, {"context_len": ctx}, [], kept)


def _request_decode(
    req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision, batch: int
) -> _Part:
    """A request's output_len - 1 decode steps after its prefill, at the mean context:
    attention is linear in the context, so steps x mean context is the exact sum (step j
    attends to input_len + j keys; with pages, the mean of the paged lengths)."""
    ilen, olen, page = req.input_len, req.output_len, req.kv_page_tokens
    steps, mean_ctx = olen - 1, mean_paged_len(ilen + 1, ilen + olen - 1, page)
    shape = _decode_shape(batch, mean_ctx)
    # a sliding layer's steps read min(context, window) keys each: their mean, rounded up
    contexts = [paged_len(c, page) for c in range(ilen + 1, ilen + olen)]
    mean_window = -(-sum(window_keys(c, cfg.sliding_window) for c in contexts) // len(contexts))
    window = _decode_shape(batch, mean_window) if mean_window < mean_ctx else None
    layers, head = _phases(req, cfg, prec, "decode", shape, (batch, batch), "Va_Mw", steps, window)
    note = (
        f"decode: {steps} steps at the mean context {mean_ctx} (input_len + "
        "output_len / 2): steps x mean context = the exact attention sum"
    )
    last = paged_len(ilen + olen - 1, page)
    extra = {"context_len": mean_ctx}
    kept = batch * window_keys(last, cfg.sliding_window)
    return _Part(layers, head, batch * last, extra, [note], kept)


def _chunked_prefill(req: setup_pb2.LlmInference, cfg: ModelConfig, prec: Precision) -> _Part:
    """One scheduler step: the GEMMs over the prefill chunk and the decode tokens together,
    attention as two kernels (the chunk's, the decode tokens' at context_len)."""
    ilen, chunk, dec = req.input_len, req.chunk_size, req.decode_batch
    ctx = paged_len(req.context_len or ilen, req.kv_page_tokens)
    seqs = max(1, req.prefill_sequences)  # whole prompts of chunk / seqs tokens
    prefix = max(0, ilen - chunk) if seqs == 1 else 0
    q = chunk // seqs
    segs = [AttnSegment("attention_prefill", seqs, q, prefix + q, cached=prefix > 0, cls="Ma_Mqa")]
    if dec:
        segs.append(AttnSegment("attention_decode", dec, 1, ctx, cached=True, cls="Va_Mqa"))
    shape = LayerShape(chunk + dec, tuple(segs), "Ma_Mw", kv_write=True, absorbed=cfg.is_mla)
    layers, head = _phases(
        req, cfg, prec, "chunked_prefill", shape, (chunk + dec, dec + seqs), "Ma_Mw"
    )
    where = (
        "the first chunk (attends to itself)"
        if not prefix
        else f"the last chunk of a {ilen}-token prompt ({prefix} earlier tokens cached)"
    )
    if seqs > 1:
        where = f"{seqs} whole prompts of {q} tokens (each attends to itself)"
    note = (
        f"chunked prefill: {chunk} prefill tokens, {where}, + {dec} decode tokens at context {ctx}"
    )
    extra = {"chunk_size": chunk, "decode_batch": dec, "context_len": ctx}
    # a sliding layer holds the window before the chunk and the chunk's own K/V it attends to
    w = cfg.sliding_window
    kept = window_keys(prefix + chunk, w, chunk) if seqs == 1 else seqs * window_keys(q, w, q)
    window_tokens = kept + dec * window_keys(ctx, w)
    return _Part(layers, head, prefix + chunk + dec * ctx, extra, [note], window_tokens)
