"""An MLP activation as a framework runs it op by op (PyTorch eager), not one fused kernel.

NeMo 1.x builds Megatron-core's MLP with its own `squared_relu(x) = torch.pow(relu(x), 2)`,
not jit-compiled (nemo/collections/nlp/modules/common/megatron/utils.py, picked by
activation_to_func in nemo/collections/nlp/parts/utils_funcs.py), so each op is a kernel:
  forward   relu             read a, write a                    (2a)
            pow(r, 2)        read a, write a                    (2a)
  backward  r.pow(1)         a copy: read a, write a            (2a)   pow's backward is
            2 * that         read a, write a                    (2a)   grad * (2 * r^1)
            grad * that      read 2a, write a                   (3a)
            relu backward    threshold_backward(grad, r): 2a, a (3a)
That is 4a bytes per element forward and 10a backward (a = 2 for 16-bit activations), where
a fused activation moves 2a and 3a.

A gated activation in plain PyTorch, `gate, up = x.chunk(2, -1); act(gate) * up` (Llama's
SwiGLU MLP as eager code writes it), per element of the output (x holds two):
  forward   act(gate)        read a, write a                    (2a)
            s * up           read 2a, write a                   (3a)
  backward  dy * s           the up half's gradient: 2a, a      (3a)
            dy * up          the activation's gradient: 2a, a   (3a)
            act backward     act_backward(that, gate): 2a, a    (3a)
            chunk backward   the two halves' gradients concatenated into x's: 2a, 2a (4a)
That is 5a forward and 13a backward, where the fused kernel moves 3a and 5a.

Rotary position embedding in plain PyTorch, `x cos + cat(-x2, x1) sin` (x1, x2 the halves
of each head's width, Llama's rotate_half), per element of x:
  forward   -x2              read a/2, write a/2                (a)
            cat(-x2, x1)     read a, write a                    (2a)
            x cos, cat sin   read a, write a each               (4a)    cos, sin: tables
            the sum          read 2a, write a                   (3a)
  backward  dy sin, dy cos   read a, write a each               (4a)
            -(dy sin)_1      the negation's gradient: a/2, a/2  (a)
            x1's, x2's       slice gradients: a half copied into a zero-filled whole,
                             read a/2, write a each            (3a)
            their sum        x's three gradients summed: 3a, a  (4a)   (the builder's)
That is 10a forward and 12a backward, where the fused kernel moves 2a and 2a.

Strided kernels: an op reading a view that is not contiguous (the halves of the fused
gate/up output; the heads of q and k, transposed to (batch, head, token) and sliced) runs
on PyTorch's non-vectorized elementwise path (Kernel.strided); an op on fresh contiguous
tensors (the sums, the products' gradients) on the vectorized one, DRAM-bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from generator.builder import Arg, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind, OperandRole, Pass
from generator.ops import ACT_FLOP

IN, OUT = OperandRole.INPUT, OperandRole.OUTPUT


def _strided(b: GraphBuilder, t: Tensor) -> Tensor:
    """Mark `t`'s producer a strided kernel (module docstring)."""
    assert t.producer is not None
    b.kernels[t.producer] = replace(b.kernels[t.producer], strided=True)
    return t


def eager_squared_relu(
    b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """relu(x)^2 as `<name>_relu`, `<name>_pow`; backward `<name>_pow_bwd_copy`,
    `<name>_pow_bwd_scale`, `<name>_pow_bwd`, `<name>_relu_bwd` (module docstring)."""
    dims = x.dims
    n = dims_elements(dims)
    shard = list(shardable)

    def vector(kname: str, args: list[Arg], flop: float, **kw: object) -> Tensor:
        return b.add_vector(kname, KernelKind.ELEMENTWISE, args, flop, shardable=shard, **kw)

    r = vector(f"{name}_relu", [Arg("in", IN, dims, abpe, x), Arg("out", OUT, dims, abpe)], n)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        bwd = {"pass_": Pass.BWD}
        r1 = vector(
            f"{name}_pow_bwd_copy",
            [Arg("in", IN, dims, abpe, b.saved(r)), Arg("out", OUT, dims, abpe)],
            0,
            **bwd,
        )
        two_r = vector(
            f"{name}_pow_bwd_scale",
            [Arg("in", IN, dims, abpe, r1), Arg("out", OUT, dims, abpe)],
            n,
            **bwd,
        )
        dr = vector(
            f"{name}_pow_bwd",
            [
                Arg("dy", IN, dims, abpe, b.view(dy, dims)),
                Arg("scale", IN, dims, abpe, two_r),
                Arg("dr", OUT, dims, abpe),
            ],
            n,
            **bwd,
        )
        dx = vector(
            f"{name}_relu_bwd",
            [
                Arg("dr", IN, dims, abpe, dr),
                Arg("out", IN, dims, abpe, b.saved(r)),
                Arg("dx", OUT, dims, abpe),
            ],
            n,
            **bwd,
        )
        return [(x, dx)]

    return vector(
        f"{name}_pow",
        [Arg("in", IN, dims, abpe, r), Arg("out", OUT, dims, abpe)],
        n,
        rule=rule,
    )


def eager_gated(
    b: GraphBuilder, name: str, x: Tensor, out: Dims, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """act(gate) * up of x's two halves (`out` each) as `<name>_act`, `<name>_mul`; backward
    `<name>_mul_bwd_up`, `<name>_mul_bwd_act`, `<name>_act_bwd`, and the builder's
    `<x's producer>_grad_sum` joining the halves' gradients (module docstring)."""
    n = dims_elements(out)
    shard = list(shardable)
    gate, up = b.part(x, out), b.part(x, out)

    def vector(kname: str, args: list[Arg], flop: float, **kw: object) -> Tensor:
        return b.add_vector(kname, KernelKind.ELEMENTWISE, args, flop, shardable=shard, **kw)

    s = vector(
        f"{name}_act", [Arg("in", IN, out, abpe, gate), Arg("out", OUT, out, abpe)], ACT_FLOP * n
    )
    _strided(b, s)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dy, bwd = b.view(dy, out), {"pass_": Pass.BWD}

        def product(kname: str, other: Tensor) -> Tensor:
            args = [Arg("dy", IN, out, abpe, dy), Arg("by", IN, out, abpe, other)]
            return vector(kname, [*args, Arg("out", OUT, out, abpe)], n, **bwd)

        d_up = product(f"{name}_mul_bwd_up", b.saved(s))
        d_act = _strided(b, product(f"{name}_mul_bwd_act", b.part(b.saved(x), out)))
        d_gate = vector(
            f"{name}_act_bwd",
            [
                Arg("dy", IN, out, abpe, d_act),
                Arg("gate", IN, out, abpe, b.part(b.saved(x), out)),
                Arg("out", OUT, out, abpe),
            ],
            ACT_FLOP * n,
            **bwd,
        )
        return [(x, _strided(b, d_gate)), (x, d_up)]

    product = vector(
        f"{name}_mul",
        [Arg("act", IN, out, abpe, s), Arg("up", IN, out, abpe, up), Arg("out", OUT, out, abpe)],
        n,
        rule=rule,
    )
    return _strided(b, product)


def eager_rope(
    b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """x cos + rotate_half(x) sin over x's last dim (the head width) as `<name>_neg`,
    `<name>_cat`, `<name>_cos`, `<name>_sin` and the sum `<name>`; backward `<name>_bwd_sin`,
    `<name>_bwd_cos`, `<name>_bwd_neg`, `<name>_bwd_slice1`, `<name>_bwd_slice2` and the
    builder's sum of x's three gradients (module docstring)."""
    dims = x.dims
    n = dims_elements(dims)
    (width_name, width), rows = dims[-1], dims[:-1]
    if width % 2:
        raise ValueError(f"{name}: RoPE needs an even head width, got {width_name}={width}")
    half = (*rows, ("rope_half", width // 2))
    pair = (*rows, ("rope_pair", 2), ("rope_half", width // 2))
    shard = list(shardable)

    def vector(kname: str, args: list[Arg], flop: float, **kw: object) -> Tensor:
        return b.add_vector(kname, KernelKind.ELEMENTWISE, args, flop, shardable=shard, **kw)

    def unary(kname: str, src: Tensor, src_dims: Dims, out_dims: Dims, **kw: object) -> Tensor:
        args = [Arg("in", IN, src_dims, abpe, src), Arg("out", OUT, out_dims, abpe)]
        return _strided(b, vector(kname, args, dims_elements(out_dims), **kw))

    neg = unary(f"{name}_neg", b.part(x, half), half, half)
    cat = vector(
        f"{name}_cat",
        [Arg("neg", IN, half, abpe, neg), Arg("x1", IN, half, abpe, b.part(x, half))]
        + [Arg("out", OUT, pair, abpe)],
        0,
    )
    by_cos = unary(f"{name}_cos", x, dims, dims)
    by_sin = unary(f"{name}_sin", b.view(_strided(b, cat), dims), dims, dims)

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dy, bwd = b.view(dy, dims), {"pass_": Pass.BWD}
        d_cat = unary(f"{name}_bwd_sin", dy, dims, dims, **bwd)
        d_x = unary(f"{name}_bwd_cos", dy, dims, dims, **bwd)
        d_neg = unary(f"{name}_bwd_neg", b.part(d_cat, half), half, half, **bwd)
        d_x2 = unary(f"{name}_bwd_slice2", d_neg, half, pair, **bwd)
        d_x1 = unary(f"{name}_bwd_slice1", b.part(d_cat, half), half, pair, **bwd)
        return [(x, d_x), (x, b.view(d_x1, dims)), (x, b.view(d_x2, dims))]

    return vector(
        f"{name}",
        [Arg("cos", IN, dims, abpe, by_cos), Arg("sin", IN, dims, abpe, by_sin)]
        + [Arg("out", OUT, dims, abpe)],
        n,
        rule=rule,
    )
