"""An MoE layer's token movement: the routed token copies put in expert order (dispatch)
and summed back into token order (combine), fused or as PyTorch's ops (setup.proto
MoePermute).

Fused (Transformer Engine's permute fusion, the engines' expand and finalize kernels): one
kernel each way, priced by its DRAM traffic. Unfused (Megatron-core without permute fusion,
plain PyTorch MoE layers): dispatch is index_select, a gather; combine scales every copy by
its routing probability in a pass of its own (`routed_scale`), then scatter_add_ /
index_add_ sums the copies into a zero-filled token tensor with one 16-bit atomic add per
element, and the gather's gradient (`dispatch_bwd`) is such a scatter-add too: those two
kernels take at least their elements at the chip's atomic-add rate (Kernel.atomic_adds,
solver.cost.kernel_times). PyTorch launches each of those ops' steps as a kernel of its
own (EAGER_LAUNCHES): at a decode step's few tokens the launches, not the bytes, set the
time (Kernel.launches: one kernel overhead each)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from generator.builder import Dim, Dims, GraphBuilder, Tensor
from generator.graph import Communication, KernelKind
from generator.ops import binary, unary

SHARDABLE = ["tokens", "experts"]
# Unfused routing's kernels -> the launches each stands for, counted in PyTorch's ops as
# benchmarks/gpu_moe.moe_ffn and Megatron-core's unfused path run them (the H200 decode
# profiles in tests/data/profiles/h200 show them one by one); forward kernels only.
EAGER_LAUNCHES = {
    "topk": 6,  # FP32 cast, softmax, top-k (a select and a sort), sum and divide (renormalise)
    # argsort, index // k, index_select, tokens per expert (two fills, a scatter-add, a
    # two-pass scan, an int32 cast)
    "dispatch": 9,
    "routed_scale": 3,  # the probabilities gathered into copy order, cast, the product
    "combine": 2,  # the zero-filled output, index_add_
}
# PyTorch sorts more than SMALL_SORT_KEYS keys (ATen's should_use_small_sort) with CUB's
# radix sort instead of one in-place kernel: the stable argsort of the int64 expert ids
# then launches an index fill, a histogram, an exclusive sum and eight onesweep passes (8
# bits of the 64-bit keys each) where EAGER_LAUNCHES counts one (the FIT prefill profile
# tests/data/profiles/h200/prefill_qwen3_30b_a3b_layer_b1_s2048.json shows the eleven)
SMALL_SORT_KEYS = 4096
RADIX_ARGSORT_LAUNCHES = 11

# A per-expert loop's kernels (MOE_GEMM_PER_EXPERT: benchmarks/gpu_moe.moe_ffn's Python
# loop over `x.split(tokens_per_expert.tolist())`, Megatron-core's SequentialMLP) -> the
# ops each issues per expert, forward as the loop runs them and backward as autograd
# replays them (Kernel.host_loop_ops; priced at Execution.host_op_us each).
# With eager_activation the activation is its eager ops (ops_eager.eager_gated), one each;
# the chunk's gradient (a cat, the builder's expert_gate_up_grad_sum) stays counted on
# expert_gate_up_bwd, so both forms issue 12 ops per expert.
PER_EXPERT_HOST_OPS = {
    "expert_gate_up": 1,  # x_e @ w_gu[e].t()
    "expert_act": 2,  # silu(gate), * up
    "expert_act_act": 1,  # silu(gate) (eager)
    "expert_act_mul": 1,  # * up (eager)
    "expert_down": 1,  # @ w_down[e].t()
    "expert_down_bwd": 1,  # its input gradient
    "expert_down_weight_update": 1,  # its weight gradient
    "expert_act_bwd": 3,  # the product's two gradients, silu's
    "expert_act_mul_bwd_up": 1,  # (eager) the product's gradients
    "expert_act_mul_bwd_act": 1,
    "expert_act_act_bwd": 1,  # (eager) silu's
    "expert_gate_up_bwd": 2,  # the chunk's gradient (a cat), the input gradient
    "expert_gate_up_weight_update": 1,
}


def dispatch_launches(copies: int) -> int:
    """Launches of the unfused dispatch that argsorts `copies` expert ids (its argsort one
    kernel up to SMALL_SORT_KEYS keys, RADIX_ARGSORT_LAUNCHES beyond)."""
    extra = RADIX_ARGSORT_LAUNCHES - 1 if copies > SMALL_SORT_KEYS else 0
    return EAGER_LAUNCHES["dispatch"] + extra


def _mark(b: GraphBuilder, name: str, **change: object) -> None:
    """Set fields of the builder's kernel `name` (its cost: Kernel.atomic_adds, .strided)."""
    b.kernels[name] = replace(b.kernels[name], **change)


def _exchange(
    b: GraphBuilder,
    name: str,
    data: tuple[Tensor, Dims],
    route: tuple[Tensor, Dims],
    out: Dims,
    moved: float,
    abpe: float,
    flop_per_element: float = 1.0,
) -> Tensor:
    """A kernel moving `moved` elements of `data` by the routing table, all-to-all over the
    EP group when experts are split."""
    return binary(
        b,
        name,
        [("in", *data), ("route", *route)],
        out,
        flop_per_element * moved,
        abpe=abpe,
        kind=KernelKind.ROUTER,
        cls="Va_Va",
        shardable=SHARDABLE,
        comm=Communication.ALL_TO_ALL,
        comm_bytes=moved * abpe,
    )


@dataclass(frozen=True)
class Permutation:
    """One MoE layer's routed copies: `route` the routing table, `dims` = (T, H, R, E, C)
    (tokens, hidden, the table's expert dim, this rank's experts, tokens per expert),
    `routed` the copies, `abpe` activation bytes per element, `scatter_add` unfused."""

    b: GraphBuilder
    route: Tensor
    dims: tuple[Dim, Dim, Dim, Dim, Dim]
    routed: int
    abpe: float
    scatter_add: bool
    dedup: tuple[int, int] = (0, 0)  # (experts, top-k): Kernel.dedup_experts, .dedup_top_k

    def dispatch(self, h: Tensor) -> Tensor:
        """The copies of h (T, H) in expert order (E, C, H), all-to-all under EP."""
        T, H, R, E, C = self.dims
        moved = self.routed * H[1]
        disp = _exchange(
            self.b, "dispatch", (h, (T, H)), (self.route, (T, R)), (E, C, H), moved, self.abpe
        )
        self._dedup("dispatch", h.requires_grad)
        if self.scatter_add:
            _mark(self.b, "topk", launches=EAGER_LAUNCHES["topk"])
            _mark(self.b, "dispatch", launches=dispatch_launches(self.routed))
        if self.scatter_add and h.requires_grad:  # its backward exists once emitted
            self.b.defer(lambda: _mark(self.b, "dispatch_bwd", atomic_adds=moved))
        return disp

    def _dedup(self, name: str, backward: bool) -> None:
        """Kernel `name` and, once emitted, its backward send a token once per destination
        chip (`dedup`), when set."""
        if self.dedup == (0, 0):
            return
        fields = {"dedup_experts": self.dedup[0], "dedup_top_k": self.dedup[1]}
        _mark(self.b, name, **fields)
        if backward:
            self.b.defer(lambda: _mark(self.b, f"{name}_bwd", **fields))

    def combine(self, down: Tensor) -> Tensor:
        """The expert outputs (E, C, H) weighted and summed back to (T, H)."""
        T, H, R, E, C = self.dims
        moved = self.routed * H[1]
        if self.scatter_add:  # a product with the probabilities broadcast over hidden:
            # PyTorch's non-vectorized elementwise path each way (Kernel.strided)
            shard = ["experts", "expert_tokens"]
            down = unary(
                self.b, "routed_scale", down, abpe=self.abpe, flop_per_element=1, shardable=shard
            )
            _mark(self.b, "routed_scale", strided=True, launches=EAGER_LAUNCHES["routed_scale"])
            if down.requires_grad:
                self.b.defer(lambda: _mark(self.b, "routed_scale_bwd", strided=True))
        data, route = (down, (E, C, H)), (self.route, (T, R))
        out = _exchange(self.b, "combine", data, route, (T, H), moved, self.abpe, 2.0)  # x p, +
        self._dedup("combine", down.requires_grad)
        if self.scatter_add:
            _mark(self.b, "combine", atomic_adds=moved, launches=EAGER_LAUNCHES["combine"])
        return out
