"""Where a kernel's compute time comes from, said with every number (DESIGN.md, "Where
kernel times come from"): one function, `kernel_compute_time`, answers "how long does this
kernel (class, per-chip shape, precision) compute on this chip" for the menus, and through
their options for the MILP, the re-checks and the reports alike.

Sources, first that applies:
1. a measured table (hardware.kernel_db) when the chip carries one (`Chip.kernel_source`,
   resolved from `system.kernel_source`) and it covers the kernel: two-input GEMMs in
   BF16/FP16 (the bfloat16 rows: same tensor-core rate) and FP8 (the per-tensor FP8 rows
   less the activation quantize they include, from the same version's quantize table; the
   engines fuse that quantize into the producer, FP8 training casts it in kernels of its own);
   interpolated over shape, exact on grid points (`kernel_db.lookup`); and group-aware
   decode attention (TensorRT-LLM's generation-attention table, over sequences and KV
   tokens, per head layout and cache type), which is memory-bound: its time stands for the
   compute part and the model's own KV traffic still bounds it from below. Which classes
   read the tables is `Chip.kernel_tables` (hardware.kernel_source: every GEMM and decode
   attention when the setup names a source; left unset, on the chips where that predicts
   the FIT rows better, the BF16/FP16 GEMMs short of one wave of library tiles, held to
   the fitted plateau and the launch floor, and decode attention); solver.cost.table_times
   reads the tables;
2. the roofline with the chip's calibrated efficiency (solver.cost.efficiency), "fitted";
3. the peak, "uncalibrated", when the chip (or the precision) has no fitted rate.

An MoE layer's grouped GEMM (GemmShape.grouped) is its experts' GEMMs, each priced at its
own shape by the same sources (`grouped_gemm_time`): fine-grained experts (few tokens each,
narrow FFN) pay their per-expert tile waves and short K loops instead of running at the rate
of one large GEMM of all their tokens.

A table times the whole kernel from launch to end (CUDA-graph replay), so it already holds
what the chip's `kernel_overhead_s` stands for: the compute part returned is the table time
less that overhead, which the menus add back, so a GEMM alone costs its table time. Memory
traffic, tiling, fusion and sharding stay MapShard's own on every path: the table replaces
the fitted GEMM efficiency, not the search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.graph import Kernel, KernelKind, Pass
from hardware.system import Chip
from solver.cost import causal_attention, efficiency, unsplit_decode
from solver.cost.causal_attention import CausalAttentionShape
from solver.cost.core_rates import conversion_rate, exp_rate
from solver.cost.table_times import (
    DecodeAttentionShape,
    KernelTime,
    floor_rate,
    gemm_table_of,
    measured_decode_attention_time,
    measured_gemm_time,
)

FITTED = "fitted plateau"
UNCALIBRATED = "peak, uncalibrated"
LARGE = 1 << 14  # the cube whose efficiency stands for a matrix kernel without GEMM roles


@dataclass(frozen=True)
class GemmShape:
    """A two-input matrix kernel's per-chip loop extents (batch = independent GEMMs).
    `grouped`: the batch is an MoE layer's experts, each a GEMM of its own shape (the
    frameworks' grouped linear layers: Transformer Engine runs a cuBLAS GEMM per expert,
    CUTLASS grouped kernels pad each expert's rows to whole tiles), so a wave of tiles never
    spans two experts and each expert pays its own tile quantisation and K loop; a batched
    GEMM (one strided kernel, e.g. attention heads) fills the machine across the batch."""

    m: int
    n: int
    k: int
    batch: int = 1
    grouped: bool = False


# ---------------------------------------------------------------------------------------
# The physical model's sources
# ---------------------------------------------------------------------------------------


def _fitted(chip: Chip, part: str = "") -> str:
    """FITTED (or the named fitted part) when the chip's efficiency is calibrated."""
    if chip.efficiency.fixed_compute_util > 0:
        return "fixed compute_util"
    if not chip.calibration.calibrated:
        return UNCALIBRATED
    return part or FITTED


def gemm_source(chip: Chip, precision: str) -> str:
    """The source of a GEMM time from the model (efficiency.for_precision's plateau)."""
    if efficiency.plateau_warning(chip, precision):
        return UNCALIBRATED
    return _fitted(chip)


def _why_no_table(chip: Chip, shape: GemmShape, precision: str) -> str:
    if gemm_table_of(chip, precision, shape.m, shape.n) is None:
        return ""
    if shape.batch > 1:
        return f" (no {chip.kernel_source} table for batched GEMMs)"
    return f" (no {chip.kernel_source} {precision} GEMM table covers it)"


def grouped_gemm_time(
    chip: Chip, shape: GemmShape, flop: float, precision: str, split: float = 1.0
) -> KernelTime:
    """Compute part of an MoE layer's grouped GEMM (GemmShape.grouped): `batch` experts,
    each the GEMM (m, n, k) priced at its own shape (a measured table's point, once its
    per-kernel overhead is taken out, or the model's efficiency at that shape), summed; one
    kernel overhead for the group (the menus add it) and the GEMM floor once."""
    per_flop = flop / shape.batch
    measured = measured_gemm_time(chip, shape.m, shape.n, shape.k, precision)
    overhead = chip.efficiency.kernel_overhead_s
    if measured is not None:
        rate = floor_rate(chip, precision)
        floor = per_flop / rate if rate > 0 else 0.0
        each = max(measured.seconds / split - overhead, floor, 0.0)
        source = f"{measured.source}, per expert x {shape.batch}"
        return KernelTime(shape.batch * each, source)
    peak = chip.peak(precision) * split
    eff = efficiency.gemm_efficiency(chip, shape.m, shape.n, shape.k, 1)
    work = shape.batch * per_flop / (peak * eff)
    seconds = max(work, efficiency.busy_floor(chip))
    source = gemm_source(chip, precision) + f", per-expert shape x {shape.batch}"
    why = _why_no_table(chip, replace(shape, batch=1), precision)
    return KernelTime(seconds, source + why, seconds - work)


def gemm_compute_time(
    chip: Chip, shape: GemmShape, flop: float, precision: str, split: float = 1.0
) -> KernelTime:
    """Compute part of one GEMM at `precision` (`chip` already at that precision's plateau,
    `efficiency.for_precision`); `split` is the split-accumulation rate factor (<= 1)."""
    if shape.grouped and shape.batch > 1:
        return grouped_gemm_time(chip, shape, flop, precision, split)
    measured = None
    if shape.batch <= 1:
        measured = measured_gemm_time(chip, shape.m, shape.n, shape.k, precision)
    if measured is not None:
        rate = floor_rate(chip, precision)
        work = max(measured.seconds / split - chip.efficiency.kernel_overhead_s, 0.0)
        work = max(work, flop / rate if rate > 0 else 0.0)
        # the table replays CUDA graphs: a GEMM launched from the host still waits on the
        # launch-rate floor (busy_floor, 0 under execution.cuda_graph)
        seconds = max(work, efficiency.busy_floor(chip))
        return KernelTime(seconds, measured.source, seconds - work)
    peak = chip.peak(precision) * split
    s = shape
    seconds = efficiency.gemm_compute_time(chip, flop, peak, s.m, s.n, s.k, s.batch)
    work = flop / (peak * efficiency.gemm_efficiency(chip, s.m, s.n, s.k, s.batch))
    source = gemm_source(chip, precision) + _why_no_table(chip, shape, precision)
    return KernelTime(seconds, source, max(seconds - work, 0.0))


# ---------------------------------------------------------------------------------------
# The one function
# ---------------------------------------------------------------------------------------


def attention_precision(math_precision: str) -> str:
    """The precision a fused attention kernel computes in: 16-bit under 8- or 4-bit GEMMs
    (FP8 recipes quantise the linear layers; softmax(QK^T)V stays in BF16, issue #16)."""
    return "bf16" if math_precision in ("fp8", "int8", "int4") else math_precision


def attention_rate(chip: Chip, precision: str) -> float:
    """FLOP/s of the fused attention kernel: the peak and plateau of the precision it
    computes in (`attention_precision`: BF16 under an FP8 recipe, so the BF16 plateau, not
    the FP8 one, unless the chip gives attention_util)."""
    own = attention_precision(precision)
    at_own = efficiency.for_precision(chip, own)
    return at_own.peak(own) * efficiency.attention_efficiency(at_own)


def split_factor(kernel: Kernel, chip: Chip, precision: str) -> float:
    """The split-accumulation slowdown of an FP8 training dgrad/wgrad GEMM (1 otherwise)."""
    if kernel.split_accumulate and precision == "fp8":
        return efficiency.split_accumulate_factor(chip)
    return 1.0


def kernel_compute_time(
    kernel: Kernel,
    chip: Chip,
    shape: GemmShape | None,
    flop: float,
    precision: str,
    decode: DecodeAttentionShape | None = None,
    elements: float = 0.0,
    causal: CausalAttentionShape | None = None,
    loop_experts: int = 0,
) -> KernelTime:
    """Compute time (per-kernel overhead excluded) of one kernel option and its source.
    `shape`: the per-chip GEMM extents of a two-input matrix kernel, None for any other;
    `decode`: a group-aware decode attention kernel's per-chip extents (a measured table
    times the whole kernel; its time less the overhead, never below the fused-attention
    rate's, stands for the compute part, so the kernel costs at least the table's time);
    `chip`: at the workload's math precision's plateau (`efficiency.for_precision`);
    `elements`: the option's share of the loop nest, which a strided kernel (Kernel.strided)
    handles at the chip's strided-elementwise rate at best; a scatter-add (Kernel.atomic_adds)
    does that share of its atomic adds at the chip's atomic-add rate at best;
    `causal`: a causal attention kernel's per-chip extents (self-attention or a prefill
    chunk against its cache), priced from its executed tiles where the chip is calibrated
    for it (`causal_attention_time`); `loop_experts`: the chip's experts a host loop runs
    the kernel for (Kernel.host_loop_ops), which then takes at least its ops at the host's
    time per op (Efficiency.host_op_s), overhead included, when the loop runs right after
    a sync (`host_paced`)."""
    own = _compute_time(kernel, chip, shape, flop, precision, decode, causal)
    rate = chip.efficiency.strided_elementwise_elem_per_s
    if kernel.strided and rate > 0 and elements / rate > own.seconds:
        own = KernelTime(elements / rate, STRIDED_SOURCE)
    atomic_rate = chip.efficiency.atomic_add_elem_per_s
    if kernel.atomic_adds > 0 and atomic_rate > 0:
        # the option's share of the kernel's loop nest does its share of the atomic adds
        adds = kernel.atomic_adds * elements / math.prod(size for _, size in kernel.dims)
        if adds / atomic_rate > own.seconds:
            own = KernelTime(adds / atomic_rate, ATOMIC_SOURCE)
    return host_paced(kernel, chip, own, loop_experts)


# Passes whose host loop runs right after a sync: the forward's per-expert loop follows the
# read of the tokens per expert, and a recomputed forward reads them again. Autograd replays
# the loop's backward with the split sizes it kept: no sync, so the host issues it ahead of
# the GPU and only the whole backward's excess shows (solver.search.assemble.host_exposed_s).
SYNCED_PASSES = frozenset({Pass.FWD, Pass.RECOMPUTE})


def host_paced(kernel: Kernel, chip: Chip, own: KernelTime, loop_experts: int) -> KernelTime:
    """`own`, or the host's issue time when it is longer: a loop the host runs right after
    a sync (a per-expert loop after reading the tokens per expert: `SYNCED_PASSES`) starts
    on an empty queue, so its kernels wait on the host's `host_loop_ops` x `loop_experts`
    ops. The kernel's overheads (the menus add them) count toward that time; the wait is
    reported as overhead, as the launch floor is (KernelTime.floor_s)."""
    if kernel.pass_ not in SYNCED_PASSES:
        return own
    host_s = kernel.host_loop_ops * loop_experts * chip.efficiency.host_op_s
    launches = kernel.launches * (loop_experts if kernel.per_expert_launches else 1)
    busy_s = host_s - chip.efficiency.kernel_overhead_s * launches
    if busy_s <= own.seconds:
        return own
    return KernelTime(busy_s, HOST_SOURCE, own.floor_s + busy_s - own.seconds)


STRIDED_SOURCE = "strided elementwise rate (fitted)"
ATOMIC_SOURCE = "atomic scatter-add rate (measured)"
HOST_SOURCE = "host-paced loop (execution.host_op_us)"
APPEND_OUT = ", less the K/V append"


def _compute_time(
    kernel: Kernel,
    chip: Chip,
    shape: GemmShape | None,
    flop: float,
    precision: str,
    decode: DecodeAttentionShape | None,
    causal: CausalAttentionShape | None = None,
) -> KernelTime:
    """`kernel_compute_time` of every kernel but the strided limit."""
    if flop <= 0:
        return KernelTime(0.0, "no compute")
    if kernel.math_precision and kernel.math_precision != precision:
        # a kernel at its own precision (the 16-bit LM head under FP8): that peak and plateau
        precision = kernel.math_precision
        chip = efficiency.for_precision(chip, precision)
    if kernel.unit != "vector":  # else the input says the vector unit runs it (DFModel SIMD)
        if shape is not None:
            split = split_factor(kernel, chip, precision)
            return gemm_compute_time(chip, shape, flop, precision, split)
        if kernel.kind == KernelKind.ATTENTION and decode is not None and kernel.unsplit_kv:
            unsplit = unsplit_decode_time(chip, decode, flop, precision)
            if unsplit is not None:  # else priced as the split kernel: never faster than it
                return unsplit
        if kernel.kind == KernelKind.ATTENTION and decode is not None:
            hit = measured_decode_attention_time(chip, decode)
            if hit is not None:
                least = flop / attention_rate(chip, precision)
                # the table times TensorRT-LLM's whole attention op, which also appends the
                # step's K/V to the cache (a kernel of its own: KernelKind.KV_WRITE, priced
                # by the graph): its launch comes out with the kernel's own, which the
                # menus add back
                launches = 2 * chip.efficiency.kernel_overhead_s
                busy = max(hit.seconds - launches, least)
                return KernelTime(busy, hit.source + APPEND_OUT)
        if kernel.kind == KernelKind.ATTENTION and causal is not None:
            tiled = causal_attention_time(kernel, chip, causal, flop, precision)
            if tiled is not None:
                return tiled
        if kernel.kind == KernelKind.ATTENTION:
            own = attention_precision(precision)
            fitted = "attention" in chip.calibration.measured
            source = _fitted(chip, "fitted attention rate") if fitted else gemm_source(chip, own)
            return KernelTime(flop / attention_rate(chip, precision), source)
        if kernel.kind.uses_matrix_unit or kernel.unit == "matrix":
            rate = (
                chip.peak(precision)
                * efficiency.gemm_efficiency(chip, LARGE, LARGE, LARGE)
                * split_factor(kernel, chip, precision)
            )
            return KernelTime(flop / rate, gemm_source(chip, precision))
    if kernel.kind == KernelKind.ATTENTION:
        return vector_attention_time(kernel, chip, flop)
    fitted = "vector" in chip.calibration.measured
    return KernelTime(
        flop / (vector_peak(chip, precision) * efficiency.vector_efficiency(chip)),
        _fitted(chip, "fitted vector rate") if fitted else UNCALIBRATED,
    )


def vector_peak(chip: Chip, precision: str) -> float:
    """FLOP/s of elementwise work: the chip's vector rate (FP32 lanes), and in FP64 no more
    than its FP64 peak, which a chip may hold far below its FP32 rate (B300: 1.25 against
    75 TFLOP/s; priced at the FP32 rate, an FP64 step ran above the FP64 peak)."""
    fp64 = chip.peak_flops.get("fp64", 0.0) if precision == "fp64" else 0.0
    return min(chip.vector_flops, fp64) if fp64 > 0 else chip.vector_flops


UNSPLIT_SOURCE = "fitted unsplit decode attention (per-SM streaming)"


def unsplit_decode_time(
    chip: Chip, shape: DecodeAttentionShape, flop: float, precision: str
) -> KernelTime | None:
    """A decode attention kernel with no KV split from the SMs its blocks occupy
    (solver.cost.unsplit_decode); None where the chip is not calibrated for it."""
    eff = chip.efficiency
    if eff.unsplit_decode_sm_Bps <= 0 or eff.fixed_compute_util > 0:
        return None
    per_block = unsplit_decode.block_bytes(shape.kv_tokens, shape.head_dim, shape.kv_bytes)
    blocks = shape.sequences * shape.kv_heads
    stream = unsplit_decode.seconds(
        blocks, per_block, chip.cores, eff.unsplit_decode_sm_Bps, eff.unsplit_decode_wave_s
    )
    busy = max(stream, flop / attention_rate(chip, precision))
    return KernelTime(busy, _fitted(chip, UNSPLIT_SOURCE))


CAUSAL_SOURCE = "fitted causal attention tiles"
BACKWARD_PASSES = (Pass.BWD, Pass.WGRAD)


@dataclass(frozen=True)
class _CausalPass:
    """The numbers one pass of the chosen causal attention family prices a kernel by."""

    family: str
    peak_flops: float  # the 16-bit peak it computes in
    util: float
    wave_s: float
    exps_per_score: float


def _causal_pass(kernel: Kernel, chip: Chip, precision: str) -> _CausalPass | None:
    """The kernel's pass (a recomputed forward is a forward) of the chip's first causal
    attention family (execution.attention_kernel's, hardware.resolve); None where the chip
    has no such calibration."""
    eff = chip.efficiency
    if not eff.causal_attention or eff.fixed_compute_util > 0:
        return None
    family = eff.causal_attention[0]
    backward = kernel.pass_ in BACKWARD_PASSES
    own = attention_precision(precision)
    return _CausalPass(
        family.kernel,
        efficiency.for_precision(chip, own).peak(own),
        family.bwd_util if backward else family.fwd_util,
        family.bwd_wave_s if backward else family.fwd_wave_s,
        causal_attention.BWD_EXPS_PER_SCORE if backward else causal_attention.FWD_EXPS_PER_SCORE,
    )


def causal_attention_rate(
    kernel: Kernel, chip: Chip, shape: CausalAttentionShape, precision: str
) -> float:
    """The highest FLOP/s (on the non-causal count) `causal_attention_time` prices the
    kernel at: its products alone, on the executed share (0 where the chip has no such
    calibration). The search's roofline bound takes it, so the bound stays below the plan."""
    p = _causal_pass(kernel, chip, precision)
    if p is None:
        return 0.0
    share = causal_attention.executed_share(shape.kv_len, shape.window, shape.chunk_len)
    return p.peak_flops * p.util / share


def causal_attention_time(
    kernel: Kernel, chip: Chip, shape: CausalAttentionShape, flop: float, precision: str
) -> KernelTime | None:
    """A causal attention kernel (forward, or one of its backward's two kernels) from
    the tiles it executes (solver.cost.causal_attention) at the chosen kernel family's
    fraction of the 16-bit peak it computes in; None where the chip has no such
    calibration."""
    p = _causal_pass(kernel, chip, precision)
    if p is None or p.util <= 0:
        return None
    busy = causal_attention.seconds(
        shape, flop, p.peak_flops, p.util, p.wave_s, chip.cores, exp_rate(chip), p.exps_per_score
    )
    return KernelTime(busy, _fitted(chip, f"{CAUSAL_SOURCE} ({p.family})"))


def vector_attention_time(kernel: Kernel, chip: Chip, flop: float) -> KernelTime:
    """A fused attention kernel on the vector unit (a per-query-head decode kernel,
    DecodeAttention KV_PER_QUERY_HEAD): its FMAs at the vector peak (the chip's vector_util
    stands for elementwise kernels, whose nominal FLOP stream through memory) and its type
    conversions (Kernel.converted_elements, this option's share) on their own pipe beside
    them; the slower sets the time."""
    arithmetic = KernelTime(flop / chip.vector_flops, VECTOR_PEAK_SOURCE)
    if kernel.converted_elements <= 0 or kernel.flop <= 0:
        return arithmetic
    converting = kernel.converted_elements * (flop / kernel.flop) / conversion_rate(chip)
    if converting > arithmetic.seconds:
        return KernelTime(converting, CONVERSION_SOURCE)
    return arithmetic


CONVERSION_SOURCE = "type conversions, 16 per clock per SM (CUDA C++ Programming Guide)"
VECTOR_PEAK_SOURCE = "vector peak (FMA)"


def best_gemm_rate(chip: Chip, precision: str, model_rate: float) -> float:
    """The highest FLOP/s a GEMM's compute part reaches at `precision`: the model's
    (`model_rate`) or, where a table covers the chip, the table's best grid point, whichever
    is higher (a GEMM the table does not cover keeps the model), held under `floor_rate`."""
    return max(model_rate, floor_rate(chip, precision))
