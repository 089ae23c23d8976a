"""Attention-side kernel-emitting operations: fused attention, its unfused parts (batched
GEMMs, softmax, dropout) and the KV-cache write. Same builder contract as generator/ops.py.

FLOP conventions:
- Attention (fused, flash style): 4 b s_q s_kv heads head_dim, non-causal (Megatron's
  convention; a causal kernel skips about half). Backward: 2.5x forward, in a query-gradient
  and a key/value-gradient kernel (1.25x each). The fused kernel keeps no probabilities, so
  its backward recomputes the scores S = Q K^T before dP = dO V^T, dV = P^T dO, dQ = dS K
  and dK = dS^T Q: five matrix products per tile against the forward's two (FlashAttention-2
  backward pass, Dao 2023; cuDNN's fused attention runs the same algorithm; the
  flash-attention repository's benchmarks/benchmark_flash_attention.py counts its backward
  at 2.5x the forward). Megatron's model-FLOP count (2x) leaves the recompute out; the
  hardware does it.
- Unfused attention (`bmm`, `softmax`, `dropout`): the two batched GEMMs count
  2 b s_q s_kv heads head_dim each (the same total as the fused kernel); backward: one
  batched GEMM per input, each the forward FLOP.
- Dropout writes a 1-byte keep mask (PyTorch's bool mask) beside its output; its backward
  reads the mask back.
- Rotary position embedding (`rope`): x' = x cos + rotate_half(x) sin, 3 FLOP per element
  (two products, one sum); its backward is the inverse rotation of the incoming gradient
  (the sin/cos table, seq x head_dim, is negligible against the activations).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from generator.builder import Arg, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind, OperandRole, Pass
from generator.ops import DROPOUT_FLOP, IN, KV, MASK_BYTES, OUT, SOFTMAX_FLOP, unary

# each of the fused backward's two kernels: half of its 5 products' 2.5x the forward FLOP
BWD_FLOP_SHARE = 1.25
ROPE_FLOP = 3  # per element: x cos + rotate_half(x) sin


def attention(
    b: GraphBuilder,
    name: str,
    inputs: Sequence[tuple[str, Tensor | None, Dims, OperandRole, float]],
    out: Dims,
    flop: float,
    *,
    abpe: float,
    cls: str,
    shardable: Sequence[str],
    window: int = 0,
    unsplit_kv: bool = False,
) -> Tensor:
    """Fused attention: scores and probabilities stay on chip. Inputs are (name, tensor, dims,
    role, bytes/element); KV_CACHE inputs are read from memory. Backward (training: query and
    key/value inputs only): `<name>_bwd` -> d query, `<name>_kv_bwd` -> d key/value, each the
    forward FLOP x BWD_FLOP_SHARE, each reading the inputs, the output and its gradient.
    `window`: a sliding-window layer's window in tokens (Kernel.attention_window; 0 = none),
    on the forward kernel and both gradient kernels. `unsplit_kv`: the decode kernel family
    has no KV split (Kernel.unsplit_kv), which marks a kernel of one query token against a
    KV cache whose query heads come in groups (GQA); with one query head per KV head (MHA)
    the kernel splits the cache."""
    args = [Arg(n, role, d, bpe, t) for n, t, d, role, bpe in inputs]

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None and len(inputs) == 2
        dy = b.view(dy, out)
        (qn, q, qd, _, _), (kn, kv, kd, _, _) = inputs
        assert q is not None and kv is not None
        reads = [
            Arg(qn, IN, qd, abpe, b.saved(q)),
            Arg(kn, IN, kd, abpe, b.saved(kv)),
            Arg("out", IN, out, abpe, b.saved(fwd_out)),
            Arg("dout", IN, out, abpe, dy),
        ]
        dq = b.add_kernel(
            f"{name}_bwd",
            KernelKind.ATTENTION,
            [*reads, Arg("dq", OUT, qd, abpe)],
            flop * BWD_FLOP_SHARE,
            pass_=Pass.BWD,
            kernel_class=cls,
            shardable=shardable,
        )
        dkv = b.add_kernel(
            f"{name}_kv_bwd",
            KernelKind.ATTENTION,
            [*reads, Arg("dkv", OUT, kd, abpe)],
            flop * BWD_FLOP_SHARE,
            pass_=Pass.BWD,
            kernel_class=cls,
            shardable=shardable,
        )
        assert dq is not None and dkv is not None
        _set_window(b, (f"{name}_bwd", f"{name}_kv_bwd"), window)
        return [(q, dq), (kv, dkv)]

    fwd_out = b.add_kernel(
        name,
        KernelKind.ATTENTION,
        [*args, Arg("out", OUT, out, abpe)],
        flop,
        kernel_class=cls,
        shardable=shardable,
        rule=rule,
    )
    assert fwd_out is not None
    _set_window(b, (name,), window)
    if unsplit_kv and _grouped_decode(inputs, out):
        b.kernels[name] = replace(b.kernels[name], unsplit_kv=True)
    return fwd_out


def _grouped_decode(inputs: Sequence[AttnInput], out: Dims) -> bool:
    """One query token against a KV cache, its query heads in groups of more than one."""
    sizes = dict(out)
    cached = any(role == OperandRole.KV_CACHE for _, _, _, role, _ in inputs)
    return cached and sizes.get("q_seq") == 1 and sizes.get("group", 1) > 1


def _set_window(b: GraphBuilder, names: Sequence[str], window: int) -> None:
    if window > 0:
        for n in names:
            b.kernels[n] = replace(b.kernels[n], attention_window=window)


AttnInput = tuple[str, Tensor | None, Dims, OperandRole, float]


def bmm(
    b: GraphBuilder,
    name: str,
    inputs: Sequence[AttnInput],
    out: Dims,
    *,
    abpe: float,
    cls: str,
    shardable: Sequence[str],
) -> Tensor:
    """Batched product of two activations (unfused attention: scores = Q K^T, context =
    P V): 2 x prod(loop dims) FLOP. Inputs are (name, tensor, dims, role, bytes/element); a
    KV_CACHE input is read from memory. Backward: per input with a gradient, `<name>_bwd`
    (first) / `<name>_bwd2` (second) = dy x the other input, each the forward FLOP."""
    assert len(inputs) == 2
    loop = dict(out)
    for _, _, dims, _, _ in inputs:
        loop |= dict(dims)
    flop = 2 * dims_elements(tuple(loop.items()))

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dyv = b.view(dy, out)
        pairs = []
        for i, (_, t, dims, _, _) in enumerate(inputs):
            if t is None or not t.requires_grad:
                continue
            on, ot, od, orole, obpe = inputs[1 - i]
            other = Arg(on, orole, od, obpe, b.saved(ot) if ot is not None else None)
            dx = b.add_kernel(
                name + ("_bwd" if i == 0 else "_bwd2"),
                KernelKind.BATCHED_GEMM,
                [Arg("dy", IN, out, abpe, dyv), other, Arg("dx", OUT, dims, abpe)],
                flop,
                pass_=Pass.BWD,
                kernel_class=cls,
                shardable=shardable,
            )
            assert dx is not None
            pairs.append((t, dx))
        return pairs

    args = [Arg(n, role, d, bpe, t) for n, t, d, role, bpe in inputs]
    t = b.add_kernel(
        name,
        KernelKind.BATCHED_GEMM,
        [*args, Arg("out", OUT, out, abpe)],
        flop,
        kernel_class=cls,
        shardable=shardable,
        rule=rule,
    )
    assert t is not None
    return t


def softmax(
    b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """Scale, mask and softmax over the last dim (Megatron's fused scale-mask-softmax): reads
    the scores, writes the probabilities. Backward reads dy and the probabilities."""
    dims = x.dims
    flop = SOFTMAX_FLOP * dims_elements(dims)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dx = b.add_kernel(
            f"{name}_bwd",
            KernelKind.SOFTMAX,
            [
                Arg("dy", IN, dims, abpe, b.view(dy, dims)),
                Arg("probs", IN, dims, abpe, b.saved(y)),
                Arg("dx", OUT, dims, abpe),
            ],
            flop,
            pass_=Pass.BWD,
            kernel_class="Va_Va",
            shardable=shardable,
        )
        assert dx is not None
        return [(x, dx)]

    y = b.add_kernel(
        name,
        KernelKind.SOFTMAX,
        [Arg("in", IN, dims, abpe, x), Arg("out", OUT, dims, abpe)],
        flop,
        kernel_class="Va_Va",
        shardable=shardable,
        rule=rule,
    )
    assert y is not None
    return y


def dropout(
    b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """Dropout: writes the kept values and the 1-byte keep mask; backward reads dy and the
    mask."""
    dims = x.dims
    elements = dims_elements(dims)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dx = b.add_kernel(
            f"{name}_bwd",
            KernelKind.ELEMENTWISE,
            [
                Arg("dy", IN, dims, abpe, b.view(dy, dims)),
                Arg("mask", IN, dims, MASK_BYTES),
                Arg("dx", OUT, dims, abpe),
            ],
            elements,
            pass_=Pass.BWD,
            kernel_class="Va_Va",
            shardable=shardable,
        )
        assert dx is not None
        return [(x, dx)]

    t = b.add_kernel(
        name,
        KernelKind.ELEMENTWISE,
        [
            Arg("in", IN, dims, abpe, x),
            Arg("out", OUT, dims, abpe),
            Arg("mask", OUT, dims, MASK_BYTES),
        ],
        DROPOUT_FLOP * elements,
        kernel_class="Va_Va",
        shardable=shardable,
        rule=rule,
    )
    assert t is not None
    return t


def kv_write(
    b: GraphBuilder,
    name: str,
    kv: Tensor,
    dims: Dims,
    *,
    abpe: float,
    kv_bpe: float,
    shardable: Sequence[str],
) -> None:
    """Store the new tokens' keys/values (or MLA latents) into the KV cache."""
    b.add_kernel(
        name,
        KernelKind.KV_WRITE,
        [Arg("in", IN, dims, abpe, kv), Arg("cache", KV, dims, kv_bpe)],
        dims_elements(dims),
        kernel_class="Async_KVCache",
        shardable=shardable,
    )


# A KV cache stored in fewer bytes per element than this (FP8, INT8) is not a type the
# CUDA cores compute in: a kernel that reads it element by element converts every element.
CONVERTED_BELOW_BYTES = 2.0


def kv_reread_bytes(kv_bpe: float, group: int, reread_share: float) -> float:
    """DRAM bytes per cached element a per-query-head decode kernel moves (DecodeAttention
    KV_PER_QUERY_HEAD): the G thread blocks of a group each stream the KV head; one read
    reaches DRAM, and `reread_share` of the G - 1 repeats miss the L2 and reach it too."""
    return kv_bpe * (1 + (group - 1) * reread_share)


def per_query_head(b: GraphBuilder, name: str, group: int, kv_elements: int, kv_bpe: float) -> None:
    """Make decode attention `name` a per-query-head kernel: a thread block per (sequence,
    query head) on the CUDA cores (the vector unit: no tensor cores), so its FLOP run at the
    vector rate, and an 8-bit cache's `kv_elements` (one read of every K and V element) are
    converted to the compute type once per query head, G times each (TensorRT-LLM's masked
    multi-head attention dequantizes every key and value vector it loads)."""
    converted = float(group * kv_elements) if kv_bpe < CONVERTED_BELOW_BYTES else 0.0
    b.kernels[name] = replace(b.kernels[name], unit="vector", converted_elements=converted)


def rope(b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]) -> Tensor:
    """Rotary position embedding of `x` as a kernel of its own (Megatron-LM's
    apply_rope_fusion: Transformer Engine's fused RoPE, one kernel per tensor each way):
    reads x and writes the rotated copy; the backward reads the incoming gradient only (a
    rotation by the negative angle) and writes the input's gradient."""
    return unary(
        b,
        name,
        x,
        abpe=abpe,
        flop_per_element=ROPE_FLOP,
        shardable=shardable,
        backward_reads_input=False,
    )
