"""FP8 training's quantisation kernels (Transformer Engine's per-tensor recipe).

An FP8 GEMM reads 1-byte operands, so every 16-bit activation that enters an FP8 linear layer
and every 16-bit output gradient that leaves one is converted first, by kernels of its own
that stream the tensor through DRAM (issue #16: FP8 is not "2x BF16 for free"):

- `<name>_amax` reads the tensor once and reduces it to its absolute maximum (the per-tensor
  scale of the current-scaling recipe NVIDIA's NeMo performance tables use: "scaling factors
  calculated in the current step"; the scale must exist before the first element is cast,
  hence a pass of its own);
- `<name>_cast` reads the tensor again with the scale and writes it in FP8 twice: as is and
  transposed. Hopper's FP8 tensor-core GEMMs take only the "TN" layout (both operands
  K-major), so the wgrad GEMM needs X^T and dY^T; Transformer Engine's cast_transpose kernel
  writes both in one pass.

Per element of a 16-bit tensor (2 bytes): 2 (amax read) + 2 (cast read) + 1 + 1 (FP8 and
FP8-transposed writes) = FP8_CAST_BYTES_PER_ELEMENT = 6 bytes of DRAM traffic in 2 kernels.

The forward input's cast happens once per tensor however many linear layers read it
(Megatron's fused QKV projection: one cast for Q, K and V); the output gradient of each
linear layer is cast in its backward. The weights' FP8 copies are cast once per step (cached
over micro-batches, Megatron's `is_first_microbatch`) and are not modelled here. Inference
engines fuse activation quantisation into the producing kernel (TensorRT-LLM's norm+quant
and activation+quant epilogues), so these kernels belong to training graphs only. On
Blackwell non-TN FP8 layouts exist and the transposed copy can be skipped (5 bytes per
element instead of 6); the generator does not see the chip, so it keeps Hopper's 6.
"""

from __future__ import annotations

from collections.abc import Sequence

from generator.builder import Arg, BackwardRule, Dims, GraphBuilder, Tensor, dims_elements
from generator.graph import KernelKind, OperandRole, Pass

FP8_BYTES = 1.0
SCALE_BYTES = 4.0  # one FP32 scale per tensor
# 2 reads of the 16-bit tensor + the FP8 copy and its transpose (module docstring)
FP8_CAST_BYTES_PER_ELEMENT = 2 * 2 + 2 * FP8_BYTES
AMAX_FLOP = 1  # |x| and max per element
CAST_FLOP = 2  # scale multiply and convert per element
QUANTIZE_SUFFIXES = ("_amax", "_cast")  # the two kernels of one quantisation (_quantize)


def is_quantize(name: str) -> bool:
    """Whether kernel `name` is one of a quantisation's two kernels (a recomputed one too)."""
    return name.removesuffix("_recompute").endswith(QUANTIZE_SUFFIXES)


def _quantize(
    b: GraphBuilder,
    name: str,
    x: Tensor,
    dims: Dims,
    abpe: float,
    shardable: Sequence[str],
    pass_: Pass,
    rule: BackwardRule | None = None,
) -> Tensor:
    """`<name>_amax` then `<name>_cast` on `x` viewed as `dims`; returns the FP8 tensor."""
    n = dims_elements(dims)
    amax_suffix, cast_suffix = QUANTIZE_SUFFIXES
    scale = b.add_kernel(
        f"{name}{amax_suffix}",
        KernelKind.NORM,  # a reduction over the whole tensor to one scale
        [
            Arg("in", OperandRole.INPUT, dims, abpe, x),
            Arg("amax", OperandRole.OUTPUT, (("scale", 1),), SCALE_BYTES),
        ],
        AMAX_FLOP * n,
        pass_=pass_,
        kernel_class="Va_Va",
        shardable=shardable,
        requires_grad=False,
    )
    assert scale is not None
    t = b.add_kernel(
        f"{name}{cast_suffix}",
        KernelKind.ELEMENTWISE,
        [
            Arg("in", OperandRole.INPUT, dims, abpe, x),
            Arg("scale", OperandRole.INPUT, scale.dims, SCALE_BYTES, scale),
            Arg("out", OperandRole.OUTPUT, dims, FP8_BYTES),
            Arg("out_t", OperandRole.OUTPUT, dims, FP8_BYTES),  # the transposed copy
        ],
        CAST_FLOP * n,
        pass_=pass_,
        kernel_class="Va_Va",
        shardable=shardable,
        rule=rule,
    )
    assert t is not None
    return t


def fp8_cast(
    b: GraphBuilder, name: str, x: Tensor, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """Forward: x (16-bit) -> its FP8 copy (and transposed copy) for the FP8 GEMMs that read
    it. The gradient passes straight through to x (the cast is the identity for autograd;
    no kernel)."""

    def rule(dy: Tensor | None) -> list[tuple[Tensor, Tensor]]:
        assert dy is not None
        return [(x, b.view(dy, x.dims))]

    return _quantize(b, name, x, x.dims, abpe, shardable, Pass.FWD, rule)


def fp8_grad_cast(
    b: GraphBuilder, name: str, dy: Tensor, dims: Dims, *, abpe: float, shardable: Sequence[str]
) -> Tensor:
    """Backward: a linear layer's output gradient dy (16-bit) -> FP8 dy and dy^T, read by its
    dgrad and wgrad GEMMs."""
    return _quantize(b, name, dy, dims, abpe, shardable, Pass.BWD)
