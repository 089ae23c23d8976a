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
"""

from __future__ import annotations

from collections.abc import Sequence

from generator.builder import Arg, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind, OperandRole, Pass
from generator.ops import ACT_FLOP

IN, OUT = OperandRole.INPUT, OperandRole.OUTPUT


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

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        dy, bwd = b.view(dy, out), {"pass_": Pass.BWD}

        def product(kname: str, other: Tensor) -> Tensor:
            args = [Arg("dy", IN, out, abpe, dy), Arg("by", IN, out, abpe, other)]
            return vector(kname, [*args, Arg("out", OUT, out, abpe)], n, **bwd)

        d_up = product(f"{name}_mul_bwd_up", b.saved(s))
        d_act = product(f"{name}_mul_bwd_act", b.part(b.saved(x), out))
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
        return [(x, d_gate), (x, d_up)]

    return vector(
        f"{name}_mul",
        [Arg("act", IN, out, abpe, s), Arg("up", IN, out, abpe, up), Arg("out", OUT, out, abpe)],
        n,
        rule=rule,
    )
