"""Training losses: plain softmax cross-entropy (`cross_entropy`: one kernel each way, in
the activations' type), and the LM's: vocab-parallel cross-entropy in FP32 as Megatron-LM
runs it, fused (Transformer Engine's online-softmax kernels), or PyTorch's own on FP32
logits.

Megatron-LM (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy, and
its jit-fused variant megatron/core/fusions/fused_cross_entropy.py) upcasts the 16-bit logits
to FP32 before the softmax, overwrites that FP32 copy in place with exp(logits - max) and then
with the softmax, and keeps the FP32 softmax for the backward, which scales it in place and
casts the gradient back to the logits' dtype. Every pass streams the whole [tokens, vocab]
tensor, so the loss moves several times the bytes of one 16-bit read + one 16-bit write.
Bytes per logit element (a = 16-bit activation bytes, 2); the in-place passes are marked
(Kernel.in_place), so the memory count holds one FP32 buffer through them:
  forward   upcast + max    read a, write 4     (a + 4)
            exp in place    read 4, write 4     (8)
            row sum         read 4              (4)
            normalise       read 4, write 4     (8)      = a + 24 = 26
  backward  scale in place  read 4, write 4     (8)
            downcast        read 4, write a     (4 + a)  = a + 12 = 14
The tokens-sized pieces (max, sum, target logit, loss, its all-reduces over TP) are left out:
one value per row against a vocabulary of tens of thousands per row.

Fused (Transformer Engine's cross_entropy, Megatron's cross_entropy_fusion_impl "te",
Megatron-Bridge's recipes): an online-softmax pass finds each row's max and sum in one read,
a second computes the loss and writes the 16-bit gradient in place of the logits, and the
backward scales that gradient by the loss gradient in place:
  forward   row max + sum       read a                      (a)
            loss + gradient     read a, write a             (2a)    = 3a = 6
  backward  scale in place      read a, write a             (2a)    = 4

PyTorch's own (`F.cross_entropy(logits.float(), targets)`: Hugging Face models, plain loops):
log_softmax's kernel reads a row too long for shared memory three times (max, sum of
exponentials, then the output); NLL gathers the targets (tokens-sized, left out). NLL's
backward zero-fills an FP32 gradient and scatters into it; log_softmax's backward sums each
row of that gradient, then reads it again with the log-probabilities:
  forward   upcast              read a, write 4             (a + 4)
            log_softmax         read 4 x 3, write 4         (16)    = a + 20 = 22
  backward  zero-fill           write 4                     (4)
            row sum             read 4                      (4)
            log_softmax bwd     read 4 + 4, write 4         (12)
            downcast            read 4, write a             (4 + a) = a + 24 = 26
The log_softmax forward is one launch of three passes; here it is three kernels (`_max`,
`_sumexp`, the log-probabilities), each priced by its own pass's bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from generator.builder import Arg, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind, OperandRole, Pass
from generator.ops import SOFTMAX_FLOP

IN, OUT = OperandRole.INPUT, OperandRole.OUTPUT
FP32_BYTES = 4.0
EXP_FLOP = 3  # subtract the row max, exponentiate, keep (per element)
NORM_FLOP = 1  # divide by the row sum
SCALE_FLOP = 2  # subtract the one-hot target, multiply by the loss gradient


def _over_logits(b: GraphBuilder, logits: Tensor) -> tuple[Dims, Dims, int, Callable[..., Tensor]]:
    """The logits' dims, one row per token, their element count, and an adder of the loss's
    vector kernels (split like the logits)."""
    dims = logits.dims
    shard = [d for d, _ in dims]

    def vector(kname: str, args: list[Arg], flop: float, **kw: object) -> Tensor:
        return b.add_vector(kname, KernelKind.SOFTMAX, args, flop, shardable=shard, **kw)

    return dims, (dims[0],), dims_elements(dims), vector


def _cast(
    vector: Callable[..., Tensor],
    kname: str,
    x: Tensor,
    names: tuple[str, str],
    bpe: tuple[float, float],
    **kw: object,
) -> Tensor:
    """A copy of `x` to another element width: (input, output) operand names and bytes."""
    dims = x.dims
    args = [Arg(names[0], IN, dims, bpe[0], x), Arg(names[1], OUT, dims, bpe[1])]
    return vector(kname, args, dims_elements(dims), **kw)


def _upcast(vector: Callable[..., Tensor], name: str, logits: Tensor, abpe: float) -> Tensor:
    """`<name>_upcast`: the 16-bit logits copied to FP32 (both FP32 losses start with it)."""
    return _cast(vector, f"{name}_upcast", logits, ("logits", "logits_fp32"), (abpe, FP32_BYTES))


def _downcast(vector: Callable[..., Tensor], name: str, grad: Tensor, abpe: float) -> Tensor:
    """`<name>_bwd_cast`: the FP32 logits' gradient cast back to the logits' type."""
    names, bpe = ("dlogits_fp32", "dlogits"), (FP32_BYTES, abpe)
    return _cast(vector, f"{name}_bwd_cast", grad, names, bpe, pass_=Pass.BWD)


def fp32_cross_entropy(b: GraphBuilder, name: str, logits: Tensor, *, abpe: float) -> Tensor:
    """Softmax cross-entropy over the vocabulary in FP32 (Megatron's passes, see the module
    docstring); the start of the backward pass. Kernels: `<name>_upcast`, `<name>_exp`,
    `<name>_sum`, `<name>` (the seed: softmax and loss), `<name>_bwd`, `<name>_bwd_cast`."""
    dims, rows, n, vector = _over_logits(b, logits)
    up = _upcast(vector, name, logits, abpe)
    ex = vector(
        f"{name}_exp",
        [Arg("logits_fp32", IN, dims, FP32_BYTES, up), Arg("exp", OUT, dims, FP32_BYTES)],
        EXP_FLOP * n,
        in_place="logits_fp32",
    )
    sums = vector(
        f"{name}_sum",
        [Arg("exp", IN, dims, FP32_BYTES, ex), Arg("row_sum", OUT, rows, FP32_BYTES)],
        n,
    )

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        softmax = b.saved(probs)
        grad = vector(
            f"{name}_bwd",
            [
                Arg("softmax", IN, dims, FP32_BYTES, softmax),
                Arg("targets", IN, rows, 4.0),
                Arg("dlogits_fp32", OUT, dims, FP32_BYTES),
            ],
            SCALE_FLOP * n,
            pass_=Pass.BWD,
            in_place="softmax",
        )
        return [(logits, _downcast(vector, name, grad, abpe))]

    probs = vector(
        name,
        [
            Arg("exp", IN, dims, FP32_BYTES, ex),
            Arg("row_sum", IN, rows, FP32_BYTES, sums),
            Arg("targets", IN, rows, 4.0),
            Arg("softmax", OUT, dims, FP32_BYTES),
        ],
        NORM_FLOP * n,
        rule=rule,
        seed=True,
        in_place="exp",
    )
    return probs


def fused_cross_entropy(b: GraphBuilder, name: str, logits: Tensor, *, abpe: float) -> Tensor:
    """Softmax cross-entropy as one fused online-softmax kernel pair (module docstring):
    `<name>_rowstats`, `<name>` (the seed: loss and the gradient), `<name>_bwd`."""
    dims, rows, n, vector = _over_logits(b, logits)
    stats = vector(
        f"{name}_rowstats",
        [Arg("logits", IN, dims, abpe, logits), Arg("row_stats", OUT, rows, 2 * FP32_BYTES)],
        EXP_FLOP * n,
    )

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        dx = vector(
            f"{name}_bwd",
            [Arg("grad", IN, dims, abpe, b.saved(grad)), Arg("dlogits", OUT, dims, abpe)],
            n,
            pass_=Pass.BWD,
            in_place="grad",
        )
        return [(logits, dx)]

    grad = vector(
        name,
        [
            Arg("logits", IN, dims, abpe, logits),
            Arg("row_stats", IN, rows, 2 * FP32_BYTES, stats),
            Arg("targets", IN, rows, 4.0),
            Arg("grad", OUT, dims, abpe),
        ],
        (EXP_FLOP + SCALE_FLOP) * n,
        rule=rule,
        seed=True,
        in_place="logits",
    )
    return grad


def torch_cross_entropy(b: GraphBuilder, name: str, logits: Tensor, *, abpe: float) -> Tensor:
    """PyTorch's cross_entropy on FP32-cast logits (module docstring): `<name>_upcast`,
    `<name>_max`, `<name>_sumexp`, `<name>` (the seed: log-probabilities and the loss);
    backward `<name>_bwd_zeros`, `<name>_bwd_sum`, `<name>_bwd`, `<name>_bwd_cast`."""
    dims, rows, n, vector = _over_logits(b, logits)
    up = _upcast(vector, name, logits, abpe)
    row_max = vector(
        f"{name}_max",
        [Arg("logits_fp32", IN, dims, FP32_BYTES, up), Arg("row_max", OUT, rows, FP32_BYTES)],
        n,
    )
    row_sum = vector(
        f"{name}_sumexp",
        [
            Arg("logits_fp32", IN, dims, FP32_BYTES, up),
            Arg("row_max", IN, rows, FP32_BYTES, row_max),
            Arg("row_sum", OUT, rows, FP32_BYTES),
        ],
        EXP_FLOP * n,
    )

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        zeros = vector(
            f"{name}_bwd_zeros",
            [Arg("targets", IN, rows, 4.0), Arg("dlogprobs", OUT, dims, FP32_BYTES)],
            0.0,
            pass_=Pass.BWD,
        )
        grad_sum = vector(
            f"{name}_bwd_sum",
            [Arg("dlogprobs", IN, dims, FP32_BYTES, zeros), Arg("grad_sum", OUT, rows, 4.0)],
            n,
            pass_=Pass.BWD,
        )
        grad = vector(
            f"{name}_bwd",
            [
                Arg("dlogprobs", IN, dims, FP32_BYTES, zeros),
                Arg("grad_sum", IN, rows, FP32_BYTES, grad_sum),
                Arg("logprobs", IN, dims, FP32_BYTES, b.saved(logprobs)),
                Arg("dlogits_fp32", OUT, dims, FP32_BYTES),
            ],
            (EXP_FLOP + SCALE_FLOP) * n,
            pass_=Pass.BWD,
        )
        return [(logits, _downcast(vector, name, grad, abpe))]

    logprobs = vector(
        name,
        [
            Arg("logits_fp32", IN, dims, FP32_BYTES, up),
            Arg("row_max", IN, rows, FP32_BYTES, row_max),
            Arg("row_sum", IN, rows, FP32_BYTES, row_sum),
            Arg("targets", IN, rows, 4.0),
            Arg("logprobs", OUT, dims, FP32_BYTES),
        ],
        SCALE_FLOP * n,
        rule=rule,
        seed=True,
    )
    return logprobs


def cross_entropy(b: GraphBuilder, name: str, logits: Tensor, *, abpe: float) -> Tensor:
    """Softmax cross-entropy over the vocabulary; the start of the backward pass."""
    dims = logits.dims
    tokens = dims[0]
    flop = SOFTMAX_FLOP * dims_elements(dims)
    shard = [d for d, _ in dims]

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        dx = b.add_kernel(
            f"{name}_bwd",
            KernelKind.SOFTMAX,
            [
                Arg("logits", IN, dims, abpe, b.saved(logits)),
                Arg("targets", IN, (tokens,), 4.0),
                Arg("dlogits", OUT, dims, abpe),
            ],
            flop,
            pass_=Pass.BWD,
            kernel_class="Va_Va",
            shardable=shard,
        )
        assert dx is not None
        return [(logits, dx)]

    t = b.add_kernel(
        name,
        KernelKind.SOFTMAX,
        [
            Arg("logits", IN, dims, abpe, logits),
            Arg("targets", IN, (tokens,), 4.0),
            Arg("loss", OUT, (tokens,), 4.0),
        ],
        flop,
        kernel_class="Va_Va",
        shardable=shard,
        rule=rule,
        seed=True,
    )
    assert t is not None
    return t
