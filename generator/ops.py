"""Differentiable kernel-emitting operations on a GraphBuilder (forward + backward rules).

FLOP conventions (vector kernels are rough; matrix kernels exact):
- GEMMs: 2 x product of the loop dims. Bias adds are folded into the GEMM epilogue and not
  counted. Backward: the activation gradient (`<name>_bwd`) and the weight gradient
  (`<name>_weight_update`) each cost the forward FLOP (Megatron: backward = 2x forward).
- Attention, its unfused parts and dropout: see generator/ops_attention.py.
- Per element: residual add 1, activation 4 (gated: 5), RMSNorm 4, LayerNorm 5, softmax /
  cross-entropy 5, dropout 2 (random draw, scale; backward 1); backward kernels cost the
  same as the forward unless stated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from generator.builder import Arg, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import Communication, KernelKind, OperandRole, Pass
from generator.ops_fp8 import FP8_BYTES, fp8_grad_cast

IN, W, OUT, KV = OperandRole.INPUT, OperandRole.WEIGHT, OperandRole.OUTPUT, OperandRole.KV_CACHE
ARP = Communication.ALL_REDUCE_PERIODIC

ACT_FLOP = 4
GATED_FLOP = 5
NORM_FLOP = {"rms": 4, "layer": 5}
SOFTMAX_FLOP = 5
DROPOUT_FLOP = 2
MASK_BYTES = 1.0  # dropout keep mask, bytes per element


def _split_accumulate(b: GraphBuilder, name: str, on: bool) -> None:
    """Mark an FP8 training GEMM of the backward pass as split-accumulating: Transformer
    Engine runs dgrad and wgrad with FP32 promotion of partial sums (its _2X_ACC_DGRAD /
    _2X_ACC_WGRAD), the forward GEMM with fast accumulation."""
    if on:
        b.kernels[name] = replace(b.kernels[name], split_accumulate=True)


def _names(dims: Dims) -> list[str]:
    return [d for d, _ in dims]


@dataclass(frozen=True)
class _Gemm:
    """A linear layer's forward GEMM, as its backward GEMMs need it."""

    name: str
    x_dims: Dims
    weight: Dims
    out: Dims
    bias_dims: Dims | None  # None: no bias
    kind: KernelKind
    cls: str
    shard: list[str]
    flop: float
    wbpe: float
    abpe: float
    xbpe: float  # bytes per element of the input (an FP8 copy: 1)
    fp8_grad: bool


def linear(
    b: GraphBuilder,
    name: str,
    x: Tensor | tuple[Tensor, ...],
    x_dims: Dims,
    weight: Dims,
    out: Dims,
    *,
    wbpe: float,
    abpe: float,
    bias: bool = False,
    kind: KernelKind = KernelKind.GEMM,
    cls: str = "Ma_Mw",
    shardable: Sequence[str] | None = None,
    flop: float | None = None,
    in_bpe: float | None = None,
    fp8_grad: bool = False,
) -> Tensor:
    """out = x . weight (+ bias): contraction over the dims x and weight share that out lacks.
    `x` may be several parts (a concatenation; then no backward). `flop` overrides
    2 x prod(loop dims) (MoE experts: routed tokens only). `in_bpe`: bytes per element of x
    when it differs from the output's (an FP8 copy, generator/ops_fp8.py); `fp8_grad`: the
    output gradient is cast to FP8 before the dgrad and wgrad GEMMs (FP8 training)."""
    xbpe = abpe if in_bpe is None else in_bpe
    bias_dims = tuple((d, s) for d, s in weight if d in dict(out))
    args = [Arg("in", IN, x_dims, xbpe, x), Arg("weight", W, weight, wbpe)]
    if bias:
        args.append(Arg("bias", W, bias_dims, wbpe))
    args.append(Arg("out", OUT, out, abpe))
    loop = dict(out) | dict(x_dims) | dict(weight)
    if flop is None:
        flop = 2 * dims_elements(tuple(loop.items()))
    shard = list(shardable) if shardable is not None else list(loop)
    g = _Gemm(
        name,
        x_dims,
        weight,
        out,
        bias_dims if bias else None,
        kind,
        cls,
        shard,
        flop,
        wbpe,
        abpe,
        xbpe,
        fp8_grad,
    )

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        return _linear_backward(b, g, x, dy)

    t = b.add_kernel(name, kind, args, flop, kernel_class=cls, shardable=shard, rule=rule)
    assert t is not None
    return t


def _linear_backward(
    b: GraphBuilder, g: _Gemm, x: Tensor | tuple[Tensor, ...], dy: Tensor | None
) -> list[tuple[Tensor, Tensor]]:
    """The activation gradient dx = dy . weight^T (`<name>_bwd`) now, the weight gradient
    (_weight_gradient) deferred to the end of the backward pass; under FP8 training dy is
    cast to FP8 first."""
    assert dy is not None and isinstance(x, Tensor)
    dy = b.view(dy, g.out)
    dbpe = g.abpe
    if g.fp8_grad:
        keep = [d for d, _ in g.out if d in g.shard]
        dy = fp8_grad_cast(b, f"{g.name}_grad", dy, g.out, abpe=g.abpe, shardable=keep)
        dbpe = FP8_BYTES
    pairs = []
    if x.requires_grad:
        dx = b.add_kernel(
            f"{g.name}_bwd",
            g.kind,
            [
                Arg("dy", IN, g.out, dbpe, dy),
                Arg("weight", W, g.weight, g.wbpe),
                Arg("dx", OUT, g.x_dims, g.abpe),
            ],
            g.flop,
            pass_=Pass.BWD,
            kernel_class=g.cls,
            shardable=g.shard,
        )
        assert dx is not None
        pairs.append((x, dx))
        _split_accumulate(b, f"{g.name}_bwd", g.fp8_grad)
    xs = b.saved(b.view(x, g.x_dims) if not x.part else x)
    b.defer(lambda: _weight_gradient(b, g, xs, dy, dbpe))
    return pairs


def _weight_gradient(b: GraphBuilder, g: _Gemm, xs: Tensor, dy: Tensor, dbpe: float) -> None:
    """dweight = x^T . dy (and dbias) (`<name>_weight_update`), from the saved input; the
    gradients are all-reduced over the data-parallel group once per step."""
    outs = [Arg("dweight", OUT, g.weight, g.wbpe)]
    grad_elements = dims_elements(g.weight)
    if g.bias_dims is not None:
        outs.append(Arg("dbias", OUT, g.bias_dims, g.wbpe))
        grad_elements += dims_elements(g.bias_dims)
    b.add_kernel(
        f"{g.name}_weight_update",
        g.kind,
        [Arg("in", IN, g.x_dims, g.xbpe, xs), Arg("dy", IN, g.out, dbpe, dy), *outs],
        g.flop,
        pass_=Pass.WGRAD,
        kernel_class="Ma_Ma",
        shardable=g.shard,
        communication=ARP,
        communication_bytes=grad_elements * g.wbpe,
    )
    _split_accumulate(b, f"{g.name}_weight_update", g.fp8_grad)


def norm(
    b: GraphBuilder,
    name: str,
    x: Tensor,
    *,
    kind: str,
    wbpe: float,
    abpe: float,
    weight: Dims | None = None,
    cls: str = "Va_Va",
) -> Tensor:
    """RMSNorm / LayerNorm over the last dim of x (or over `weight`'s dim, a part of it)."""
    dims = x.dims
    weight = weight or (dims[-1],)
    params = [Arg("weight", W, weight, wbpe)]
    if kind == "layer":
        params.append(Arg("bias", W, weight, wbpe))
    rows = dims_elements(dims) // dims_elements(dims[-1:])
    flop = NORM_FLOP[kind] * rows * dims_elements(weight)
    shard = [dims[0][0]]
    grad_bytes = sum(dims_elements(p.dims) for p in params) * wbpe

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dy = b.view(dy, dims)
        xs = b.saved(x)
        dx = b.add_kernel(
            f"{name}_bwd",
            KernelKind.NORM,
            [
                Arg("dy", IN, dims, abpe, dy),
                Arg("in", IN, dims, abpe, xs),
                params[0],
                Arg("dx", OUT, dims, abpe),
            ],
            flop,
            pass_=Pass.BWD,
            kernel_class=cls,
            shardable=shard,
        )
        assert dx is not None

        def wgrad() -> None:
            outs = [Arg(f"d{p.name}", OUT, p.dims, wbpe) for p in params]
            b.add_kernel(
                f"{name}_weight_update",
                KernelKind.NORM,
                [Arg("dy", IN, dims, abpe, dy), Arg("in", IN, dims, abpe, xs), *outs],
                2 * rows * dims_elements(weight),
                pass_=Pass.WGRAD,
                kernel_class=cls,
                shardable=shard,
                communication=ARP,
                communication_bytes=grad_bytes,
            )

        b.defer(wgrad)
        return [(x, dx)]

    args = [Arg("in", IN, dims, abpe, x), *params, Arg("out", OUT, dims, abpe)]
    t = b.add_kernel(
        name, KernelKind.NORM, args, flop, kernel_class=cls, shardable=shard, rule=rule
    )
    assert t is not None
    return t


def unary(
    b: GraphBuilder,
    name: str,
    x: Tensor,
    out: Dims | None = None,
    *,
    abpe: float,
    flop_per_element: float = ACT_FLOP,
    kind: KernelKind = KernelKind.ELEMENTWISE,
    cls: str = "Va_Va",
    shardable: Sequence[str] | None = None,
    backward_reads_input: bool = True,
) -> Tensor:
    """An elementwise function of x (out may drop a dim: the gated activation). Its backward
    reads the incoming gradient and, unless `backward_reads_input` is False (a linear map
    such as a rotation), the saved input."""
    out = out or x.dims
    flop = flop_per_element * dims_elements(out)
    shard = list(shardable) if shardable is not None else _names(out)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        saved = [Arg("in", IN, x.dims, abpe, b.saved(x))] if backward_reads_input else []
        dx = b.add_kernel(
            f"{name}_bwd",
            kind,
            [
                Arg("dy", IN, out, abpe, b.view(dy, out)),
                *saved,
                Arg("dx", OUT, x.dims, abpe),
            ],
            flop,
            pass_=Pass.BWD,
            kernel_class=cls,
            shardable=shard,
        )
        assert dx is not None
        return [(x, dx)]

    t = b.add_kernel(
        name,
        kind,
        [Arg("in", IN, x.dims, abpe, x), Arg("out", OUT, out, abpe)],
        flop,
        kernel_class=cls,
        shardable=shard,
        rule=rule,
    )
    assert t is not None
    return t


def add(
    b: GraphBuilder,
    name: str,
    a: Tensor,
    c: Tensor,
    *,
    abpe: float,
    shardable: Sequence[str] | None = None,
    dropout: bool = False,
) -> Tensor:
    """Residual add; its backward passes the gradient to both inputs (no kernel). With
    `dropout`, `a` is dropped out first (Megatron's fused bias-dropout-add): the kernel also
    writes the keep mask, and `a`'s gradient is the masked one (`<name>_dropout_bwd`)."""
    dims = a.dims
    shard = list(shardable) if shardable is not None else _names(dims)
    elements = dims_elements(dims)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dyv = b.view(dy, dims)
        if not dropout:
            return [(a, dyv), (c, b.view(dy, c.dims))]
        da = b.add_kernel(
            f"{name}_dropout_bwd",
            KernelKind.ELEMENTWISE,
            [
                Arg("dy", IN, dims, abpe, dyv),
                Arg("mask", IN, dims, MASK_BYTES),
                Arg("dx", OUT, dims, abpe),
            ],
            elements,
            pass_=Pass.BWD,
            kernel_class="Va_Va",
            shardable=shard,
        )
        assert da is not None
        return [(a, da), (c, b.view(dy, c.dims))]

    outs = [Arg("out", OUT, dims, abpe)]
    if dropout:
        outs.append(Arg("mask", OUT, dims, MASK_BYTES))
    t = b.add_kernel(
        name,
        KernelKind.ELEMENTWISE,
        [Arg("in1", IN, dims, abpe, a), Arg("in2", IN, dims, abpe, c), *outs],
        elements * (1 + (DROPOUT_FLOP if dropout else 0)),
        kernel_class="Va_Va",
        shardable=shard,
        rule=rule,
    )
    assert t is not None
    return t


def binary(
    b: GraphBuilder,
    name: str,
    inputs: Sequence[tuple[str, Tensor, Dims]],
    out: Dims,
    flop: float,
    *,
    abpe: float,
    kind: KernelKind,
    cls: str,
    shardable: Sequence[str],
    comm: Communication = Communication.NONE,
    comm_bytes: float = 0.0,
) -> Tensor:
    """A kernel of several activation inputs (batched activation x activation products,
    concatenations). Backward: one kernel per input needing a gradient (`<name>_bwd` for the
    first, `<name>_bwd<i>` for input i), each reading dy and the other inputs, each costing
    the forward FLOP."""

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dy = b.view(dy, out)
        pairs = []
        for i, (_, t, dims) in enumerate(inputs):
            if not t.requires_grad:
                continue
            others = [
                Arg(n, IN, d, abpe, b.saved(s)) for j, (n, s, d) in enumerate(inputs) if j != i
            ]
            suffix = "_bwd" if i == 0 else f"_bwd{i + 1}"
            dx = b.add_kernel(
                name + suffix,
                kind,
                [Arg("dy", IN, out, abpe, dy), *others, Arg("dx", OUT, dims, abpe)],
                flop,
                pass_=Pass.BWD,
                kernel_class=cls,
                shardable=shardable,
                communication=comm,
                communication_bytes=comm_bytes,
            )
            assert dx is not None
            pairs.append((t, dx))
        return pairs

    args = [Arg(n, IN, d, abpe, t) for n, t, d in inputs] + [Arg("out", OUT, out, abpe)]
    t = b.add_kernel(
        name,
        kind,
        args,
        flop,
        kernel_class=cls,
        shardable=shardable,
        rule=rule,
        communication=comm,
        communication_bytes=comm_bytes,
    )
    assert t is not None
    return t


def embedding(
    b: GraphBuilder,
    name: str,
    tokens: tuple[str, int],
    table: Dims,
    out: Dims,
    *,
    wbpe: float,
    abpe: float,
    tied: bool = False,
    positions: Dims | None = None,
    cls: str = "Vw_Va",
) -> Tensor:
    """Token (and learned position) embedding lookup: a gather of one row per token. A tied
    table is read as an INPUT here (its parameters are counted once, at the LM head)."""
    args = [Arg("ids", IN, (tokens,), 4.0), Arg("table", IN if tied else W, table, wbpe)]
    if positions:
        args.append(Arg("pos_table", W, positions, wbpe))
    args.append(Arg("out", OUT, out, abpe))
    flop = dims_elements(out) * (2 if positions else 1)
    shard = [tokens[0], table[0][0]]
    grad = (0 if tied else dims_elements(table)) + (dims_elements(positions) if positions else 0)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dyv = b.view(dy, out)

        def wgrad() -> None:
            outs = [Arg("dtable", OUT, table, wbpe)]
            if positions:
                outs.append(Arg("dpos_table", OUT, positions, wbpe))
            b.add_kernel(
                f"{name}_weight_update",
                KernelKind.EMBEDDING,
                [Arg("dy", IN, out, abpe, dyv), Arg("ids", IN, (tokens,), 4.0), *outs],
                dims_elements(out),
                pass_=Pass.WGRAD,
                kernel_class=cls,
                shardable=shard,
                communication=ARP,
                communication_bytes=grad * wbpe,
            )

        b.defer(wgrad)
        return []

    t = b.add_kernel(
        name, KernelKind.EMBEDDING, args, flop, kernel_class=cls, shardable=shard, rule=rule
    )
    assert t is not None
    return t
