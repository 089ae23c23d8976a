"""Pieces shared by the LLM training and inference generators: layer graphs, head graphs
(embedding, final norm, LM head), parameter counts and ModelInfo."""

from __future__ import annotations

from dataclasses import replace

from generator.builder import GraphBuilder, Tensor
from generator.graph import KernelGraph, KernelKind, ModelInfo, OperandRole, Pass, Phase
from generator.llm_layer import Layer, LayerShape
from generator.models import ModelConfig
from generator.moe_routing import with_expert_kernels
from generator.ops import embedding, linear, norm
from generator.ops_loss import fp32_cross_entropy, fused_cross_entropy, torch_cross_entropy
from generator.precision import Precision
from schema import setup_pb2
from schema.errors import SetupError


def layer_graph(
    name: str,
    cfg: ModelConfig,
    shape: LayerShape,
    prec: Precision,
    *,
    moe: bool,
    training: bool = False,
    recompute: str = "none",
) -> KernelGraph:
    """One layer for one graph instance. Training adds recompute copies (full: every forward
    kernel; selective: the attention core, fused or unfused) and the backward pass
    (activation gradients, then weight gradients with their data-parallel all-reduce)."""
    b = GraphBuilder(name)
    layer = Layer(b, cfg, shape, prec)
    x, out = layer.forward(moe)
    b.carry(out, x)  # this layer's output is the next instance's input
    if training:
        core = set(layer.core)
        if recompute == "full":
            b.recompute(lambda k: True)
        elif recompute == "selective":
            b.recompute(lambda k: k.kind == KernelKind.ATTENTION or k.name in core)
        grads = b.backward([out])
        # the input gradient is the previous instance's output gradient
        b.carry(grads.get(x.key), b.gradient_input(out))
    return with_expert_kernels(
        b.graph(), layer.expert_share, shape.fused_experts, shape.torch_grouped
    )


def check_positions(cfg: ModelConfig, tokens: int, where: str) -> None:
    """A model with a learned position table (GPT-2's n_positions) has no position past it:
    a sequence of more tokens cannot run (rotary models extrapolate; not checked)."""
    if cfg.positions and tokens > cfg.positions:
        raise SetupError(
            f"{where} reaches position {tokens}, beyond the {cfg.positions} learned positions "
            f"of {cfg.name} (n_positions / max_position_embeddings); give at most "
            f"{cfg.positions} tokens"
        )


def _embedding(b: GraphBuilder, cfg: ModelConfig, prec: Precision, tokens: int) -> Tensor:
    """The token (+ learned position) embedding of `tokens` tokens."""
    H, V, T = ("hidden", cfg.hidden), ("vocab", cfg.vocab), ("tokens", tokens)
    positions = (("positions", cfg.positions), H) if cfg.positions else None
    return embedding(
        b,
        "embedding",
        T,
        (V, H),
        (T, H),
        wbpe=prec.weight_bytes,
        abpe=prec.activation_bytes,
        tied=cfg.tie_embeddings,
        positions=positions,
    )


def embed_graph(name: str, cfg: ModelConfig, prec: Precision, *, tokens: int) -> KernelGraph:
    """A training step's token embedding on its own (the first pipeline stage's, where the
    LM head runs on the last: Megatron-LM with untied embeddings): the lookup and, fed by
    the first layer's input gradient, the embedding's weight gradient."""
    b = GraphBuilder(name)
    b.backward([_embedding(b, cfg, prec, tokens)])
    return b.graph()


def head_graph(
    name: str,
    cfg: ModelConfig,
    prec: Precision,
    *,
    embed_tokens: int,
    head_tokens: int,
    cls: str = "Ma_Mw",
    training: bool = False,
    loss: int = setup_pb2.LOSS_FP32_PASSES,
    embedding: bool = True,
) -> KernelGraph:
    """Token (+ learned position) embedding of `embed_tokens` (unless `embedding` is False:
    `embed_graph` holds it), and final norm + LM head over `head_tokens`; training adds the
    loss (a LossImpl: in FP32 as Megatron-LM computes it, one fused online-softmax kernel
    pair, or PyTorch's own cross_entropy) and the backward pass."""
    b = GraphBuilder(name)
    w, a = prec.weight_bytes, prec.activation_bytes
    H, V, Th = ("hidden", cfg.hidden), ("vocab", cfg.vocab), ("tokens", head_tokens)
    emb = _embedding(b, cfg, prec, embed_tokens) if embedding else None
    y = b.input((Th, H), a)
    yn = norm(b, "final_norm", y, kind=cfg.norm, wbpe=w, abpe=a)
    logits = linear(
        b,
        "lm_head",
        yn,
        (Th, H),
        (V, H),
        (Th, V),
        wbpe=w,
        abpe=a,
        cls=cls,
        shardable=["tokens", "vocab", "hidden"],
    )
    if training:
        LOSS_KERNELS[loss](b, "loss", logits, abpe=a)
        b.backward([emb] if emb is not None else [])
    return sixteen_bit_head(b.graph(), prec)


# The loss kernels of each LossImpl (generator/ops_loss.py).
LOSS_KERNELS = {
    setup_pb2.LOSS_FP32_PASSES: fp32_cross_entropy,
    setup_pb2.LOSS_FUSED: fused_cross_entropy,
    setup_pb2.LOSS_TORCH_EAGER: torch_cross_entropy,
}

# Math precisions that FP8/INT8 recipes apply to the transformer's linear layers only: the LM
# head (output projection) stays in the 16-bit activation type. Megatron-LM/NeMo build it
# as a plain ColumnParallelLinear, outside Transformer Engine's fp8_autocast modules;
# TensorRT-LLM's FP8 quantisation excludes lm_head by default.
LOW_BIT_MATH = ("FP8", "INT8", "INT4")


def sixteen_bit_head(graph: KernelGraph, prec: Precision) -> KernelGraph:
    """The head graph with its LM-head GEMMs (forward, backward, weight update) at the
    activation precision when the workload's math is 8- or 4-bit."""
    if prec.math not in LOW_BIT_MATH:
        return graph
    act = prec.activation.lower()
    kernels = tuple(
        replace(k, math_precision=act)
        if k.name.startswith("lm_head") and k.kind.uses_matrix_unit
        else k
        for k in graph.kernels
    )
    return replace(graph, kernels=kernels)


def graph_params(
    graph: KernelGraph, cfg: ModelConfig, expert_parallel: int = 1
) -> tuple[int, int, int]:
    """(parameters, active parameters per token, expert parameters): WEIGHT elements of the
    FWD kernels; expert weights (leading `experts` dim; the router's is (hidden, experts))
    count k/E of their elements as active, and `expert_parallel` times over (an EP rank's
    graph holds experts / EP of them)."""
    total = active = expert = 0
    for k in graph.kernels:
        if k.pass_ != Pass.FWD:
            continue
        for op in k.operands:
            if op.role != OperandRole.WEIGHT:
                continue
            n = k.operand_elements(op)
            if op.dims[:1] == ("experts",) and cfg.experts:
                n *= expert_parallel
                expert += n
                active += n * cfg.experts_per_token // cfg.experts
            else:
                active += n
            total += n
    return total, active, expert


def model_info(
    cfg: ModelConfig,
    layer_phases: list[Phase],
    heads: tuple[Phase, ...],
    prec: Precision,
    expert_parallel: int = 1,
) -> ModelInfo:
    """`heads`: the graphs outside the layers (embedding, LM head), each counted once;
    `expert_parallel`: the layer graphs hold one EP rank's experts (the whole model's
    counts are reported)."""
    total = active = largest = experts = 0
    for ph in layer_phases:
        t, act, e = graph_params(ph.graph, cfg, expert_parallel)
        total, active, largest = total + t * ph.count, active + act * ph.count, max(largest, t)
        experts += e * ph.count
    ht = ha = 0
    for ph in heads:
        t, act, _ = graph_params(ph.graph, cfg)
        ht, ha = ht + t, ha + act
    return ModelInfo(
        name=cfg.name,
        num_params=total + ht,
        num_active_params=active + ha,
        num_expert_params=experts,
        num_layers=cfg.layers,
        hidden_size=cfg.hidden,
        num_heads=cfg.heads,
        num_kv_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        vocab_size=cfg.vocab,
        num_experts=cfg.experts,
        experts_per_token=cfg.experts_per_token,
        kv_bytes_per_token_per_layer=cfg.kv_elements_per_token_per_layer() * prec.kv_bytes,
        params_per_layer=largest,
        params_outside_layers=ht,
        architecture=cfg.architecture,
        attention=cfg.attention,
    )


# keys per tile of a fused attention kernel (solver.cost.causal_attention.TILE): a windowed
# chunk's kernel reads whole tiles, counted from the first key of the cache
KEY_TILE = 128


def window_keys(tokens: int, window: int, new: int = 1) -> int:
    """Keys of one sequence's context a sliding-window layer reads and keeps while `new`
    tokens attend to it: the window before the first of them and the new ones (all
    `tokens` without a window, 0)."""
    return min(tokens, window + new - 1) if window > 0 else tokens


def windowed_shape(shape: LayerShape, window: int) -> LayerShape | None:
    """A sliding-window layer's shape (each query attends to the last `window` keys): its
    self-attention segments skip the key tiles outside the window (AttnSegment.window), its
    cached segments read only the last window + q - 1 keys of the cache (a multi-token
    chunk: from the start of the key tile holding the first of them, the tiles it runs), and
    a multi-token chunk among them skips the key tiles outside each query's window as well.
    None when the window covers every segment: the layer then runs as a full one."""
    segs = []
    for seg in shape.segments:
        if seg.cached:
            kv = window_keys(seg.kv_seq, window, seg.q_seq)
            banded = seg.q_seq > 1 and window < kv
            if banded:  # the kernel reads whole key tiles from the cache's start on
                kv += (seg.kv_seq - kv) % KEY_TILE
            segs.append(replace(seg, kv_seq=kv, window=window if banded else seg.window))
        elif window < seg.kv_seq:
            segs.append(replace(seg, window=window))
        else:
            segs.append(seg)
    if tuple(segs) == shape.segments:
        return None
    return replace(shape, segments=tuple(segs))


def layer_phases(
    base: str,
    cfg: ModelConfig,
    shape: LayerShape,
    prec: Precision,
    *,
    training: bool = False,
    recompute: str = "none",
    steps: int = 1,
    window_shape: LayerShape | None = None,
) -> list[Phase]:
    """The layer phase(s): one graph x num_layers; for MoE models with leading dense
    layers `<base>_dense` x first_dense_layers and `<base>_moe` x the rest; for models with
    sliding-window layers (ModelConfig.sliding_layers) whose window binds, `<base>_full` x
    the full-attention layers and `<base>_window` x the sliding ones, at `window_shape`
    (default: `windowed_shape` of `shape`; a caller whose shape stands for a mean over
    steps gives the exact one)."""
    kw = dict(training=training, recompute=recompute)
    if cfg.is_moe and cfg.first_dense_layers:
        # which of these layers slide is not known: every layer attends to the whole
        # context (ModelConfig: an upper bound on the sliding layers' work)
        return [
            Phase(
                f"{base}_dense",
                layer_graph(f"{base}_dense", cfg, shape, prec, moe=False, **kw),
                count=cfg.first_dense_layers,
                steps=steps,
            ),
            Phase(
                f"{base}_moe",
                layer_graph(f"{base}_moe", cfg, shape, prec, moe=True, **kw),
                count=cfg.moe_layers,
                steps=steps,
            ),
        ]
    windowed = None
    if cfg.windowed_layers:
        windowed = window_shape or windowed_shape(shape, cfg.sliding_window)
    if windowed is None:
        graph = layer_graph(base, cfg, shape, prec, moe=cfg.is_moe, **kw)
        return [Phase(base, graph, count=cfg.layers, steps=steps)]
    full = cfg.layers - cfg.windowed_layers
    parts = [(f"{base}_full", shape, full), (f"{base}_window", windowed, cfg.windowed_layers)]
    if not full:
        parts = [(base, windowed, cfg.windowed_layers)]
    return [
        Phase(name, layer_graph(name, cfg, s, prec, moe=cfg.is_moe, **kw), count=n, steps=steps)
        for name, s, n in parts
    ]
