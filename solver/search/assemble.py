"""From per-graph latencies to a step: pipeline schedule, data-parallel reduction, optimizer,
inference phases. Closed forms, checked by hand in tests. (The per-chip memory footprint is
solver.search.footprint's.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.graph import Communication, OperandRole, Pass, Phase, Workload
from generator.ops_fp8 import FP8_BYTES
from generator.ops_loss import FP32_BYTES
from solver.cost.collectives import hierarchical_time
from solver.cost.kernel_times import SYNCED_PASSES
from solver.cost.latency import exposed_under
from solver.cost.memo import per_phases
from solver.cost.weights import StepWeights, self_updated_params, step_sync_s
from solver.search.context_parallel import stage_ring_s
from solver.search.data_parallel import BUCKET_BYTES, DataParallelSync, SyncGroup, dp_sync
from solver.search.parallel import Choice
from solver.search.stages import (
    boundary_bytes,
    layer_phases,
    micro_batches,
    stage_layers,
    stage_work_s,
)
from solver.search.storage_rule import expert_share, rank_params, zero_shard


@dataclass(frozen=True)
class StepTimes:
    latency_s: float
    iteration_time_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    tokens_per_s: float | None = None
    micro_batches: int = 1
    bubble_s: float = 0.0
    dp_allreduce_s: float = 0.0
    optimizer_s: float = 0.0
    pp_transfer_s: float = 0.0
    breakdown: tuple[tuple[str, float], ...] = ()


def pipeline_time(stage_s: float, micro_batches: int, pp: int, interleave: int = 1) -> float:
    """1F1B (and GPipe) iteration time: (m + (p-1)/v) * t_stage (Narayanan et al. 2021)."""
    return (micro_batches + (pp - 1) / max(interleave, 1)) * stage_s


def pipeline_p2p(
    hop_s: float, v: int, pp: int, fwd_s: float, bwd_s: float, hidden: float = 1.0
) -> tuple[float, float]:
    """(exposed point-to-point time per micro-batch per stage, once-per-step fill/drain time)
    for one activation (or gradient) transfer of `hop_s` between neighbouring stages, with
    `fwd_s` / `bwd_s` the stage's forward / backward compute of one micro-batch.

    Each micro-batch crosses v x pp chunk boundaries: a stage sends v activations forward
    and v gradients backward. Plain 1F1B (v = 1) waits on each transfer (Megatron-LM's
    blocking send/recv pairs): 2 x hop per micro-batch, and the pipeline formula's
    (p - 1) fill slots carry them. The interleaved schedule (v > 1) posts its transfers
    asynchronously and computes another chunk meanwhile (Megatron-LM's
    overlap_p2p_comm, on by default for it): a forward transfer hides under one chunk's
    forward (fwd_s / v), a backward one under one chunk's backward; exposed per micro-batch
        v x (max(0, hop - fwd_s / v) + max(0, hop - bwd_s / v)),
    at `hidden` = 1; a share h < 1 of the overlap hides (solver.cost.latency.exposed_under:
    each max(0, hop - w) reads hop - h min(hop, w)); plus, once per step, the fill and
    drain that no compute covers: the first activation crossing p - 1 stages and the last
    gradient crossing them back, 2 (p - 1) x hop."""
    if pp <= 1:
        return 0.0, 0.0
    if v <= 1:
        return 2 * hop_s, 0.0
    fwd, bwd = exposed_under(hop_s, fwd_s / v, hidden), exposed_under(hop_s, bwd_s / v, hidden)
    exposed = v * (fwd + bwd)
    return exposed, 2 * (pp - 1) * hop_s


def gradient_bytes(workload: Workload) -> float:
    """Bytes of the DP gradient reduction per step (whole model), FP32 if grad_reduce_fp32."""
    total = _periodic_bytes(workload.phases)
    if total == 0 and workload.kind == "training" and not workload.forward_only:
        total = rank_params(workload) * workload.weight_bytes_per_param
    fp32 = FP32_BYTES / workload.weight_bytes_per_param if workload.grad_reduce_fp32 else 1.0
    return total * fp32


@per_phases
def _periodic_bytes(phases: tuple[Phase, ...]) -> float:
    """Bytes of the graphs' own periodic gradient all-reduces (whole model)."""
    total = 0.0
    for p in phases:
        for k in p.graph.kernels:
            if k.communication == Communication.ALL_REDUCE_PERIODIC:
                total += k.communication_bytes * p.count
    return total


def forward_fraction(workload: Workload) -> float:
    """Share of a training step's FLOP in forward kernels: splits a stage's micro-batch time
    into the forward and backward windows the DP collectives overlap with."""
    return _forward_fraction(workload.phases)


@per_phases
def _forward_fraction(phases: tuple[Phase, ...]) -> float:
    fwd = total = 0.0
    for p in phases:
        for k in p.graph.kernels:
            total += k.flop * p.count
            if k.pass_ == Pass.FWD:
                fwd += k.flop * p.count
    return fwd / total if total > 0 else 0.5


@dataclass(frozen=True)
class HostOps:
    """Ops an eager host issues for one instance of a phase's graph: `synced`, the loops run
    right after a sync ((ops per expert, experts) of each kernel: solver.cost.kernel_times
    .host_paced prices them per kernel); `backward_launches` and `backward_loops`, what it
    issues in the backward pass, which has no sync (kernel launches; loops as `synced`)."""

    synced: tuple[tuple[int, int], ...] = ()
    backward_launches: int = 0
    backward_loops: tuple[tuple[int, int], ...] = ()


@per_phases
def _host_ops(phases: tuple[Phase, ...]) -> dict[str, HostOps]:
    ops = {}
    for p in phases:
        synced, loops, launches = [], [], 0
        for k in p.graph.kernels:
            loop = (k.host_loop_ops, k.dim_sizes.get("experts", 0))
            if k.pass_ in SYNCED_PASSES:
                if k.host_loop_ops:
                    synced.append(loop)
                    continue
                if k.pass_ == Pass.FWD:
                    continue
            elif k.pass_ not in (Pass.BWD, Pass.WGRAD):
                continue
            launches += 0 if k.per_expert_launches else k.launches  # those: host_loop_ops
            if k.host_loop_ops:
                loops.append(loop)
        ops[p.name] = HostOps(tuple(synced), launches, tuple(loops))
    return ops


def host_exposed_s(workload: Workload, stage_s: float, tp: int, pp: int, host_op_s: float) -> float:
    """The backward's host time beyond its GPU time, per micro-batch on the busiest stage
    (0 when the host keeps ahead: `host_op_s` 0, Execution.host_op_us unset). Autograd
    issues the backward with no sync, so its ops (host_op_s each; a loop's per expert of
    the chip, counted as ceil(experts / TP): exact at TP 1, the least any option runs, as
    a bound needs) queue ahead of the GPU and only their excess over
    the backward's GPU time shows: max(0, H - G). G is the stage's time less the synced
    loops' host time (which paces those kernels), split by the forward FLOP share, as the
    DP windows are; the result never falls as `stage_s` grows (a bound stays a bound)."""
    if host_op_s <= 0 or workload.forward_only:
        return 0.0
    ops = _host_ops(workload.phases)

    def loops(terms: tuple[tuple[int, int], ...]) -> float:
        return sum(n * -(-experts // tp) for n, experts in terms)

    synced = {name: loops(o.synced) * host_op_s for name, o in ops.items()}
    issued = {
        name: (o.backward_launches + loops(o.backward_loops)) * host_op_s for name, o in ops.items()
    }
    instances = max(workload.instances_per_micro_batch, 1)
    paced = stage_work_s(workload, synced, pp) * instances
    host = stage_work_s(workload, issued, pp) * instances
    gpu = max(stage_s - paced, 0.0) * (1.0 - forward_fraction(workload))
    return max(host - gpu, 0.0)


def training_times(
    workload: Workload,
    choice: Choice,
    phase_latency: dict[str, float],
    dram_Bps: float,
    stored: float | None = None,
    weights: StepWeights | None = None,
    hidden: float = 1.0,
    attention_s: dict[str, tuple[float, float]] | None = None,
    cast_elem_per_s: float = 0.0,
    host_op_s: float = 0.0,
) -> StepTimes:
    """Step time; `stored`: parameters per chip as the mapping stores them (the optimizer
    updates every stored copy), None = split over TP x PP; `weights`: per chip, the
    replicas whose gradient the step syncs over TP and the parameters the graphs' own
    OPTIMIZER kernels update (solver.cost.weights.StepWeights), None = no replica and the
    graph-updated weights split over TP x PP (the least any mapping charges); `hidden`:
    the share of a collective run beside compute (DP buckets, pipeline and ring transfers)
    that hides under it (ExecutionOptions.comm_hidden_share); `attention_s`: under context
    parallelism, each layer phase's attention seconds a ring hop hides under
    (context_parallel.attention_seconds), needed when CP > 1; `cast_elem_per_s`: the chip's
    rate for the master-gradient cast (`grad_cast_floor_s`), 0 = its bytes alone;
    `host_op_s`: an eager host's time per op (`host_exposed_s`), 0 = it keeps ahead."""
    tp, pp = choice.degree("TP"), choice.degree("PP")
    m = micro_batches(workload, choice.data_ranks())
    stage = stage_work_s(workload, phase_latency, pp)
    stage *= max(workload.instances_per_micro_batch, 1)
    host = host_exposed_s(workload, stage, tp, pp, host_op_s)
    if workload.context_parallel > 1:
        assert attention_s is not None, "context parallelism needs the attention seconds"
        span = choice.span("CP")
        stage += stage_ring_s(workload, span, tp, pp, attention_s, dram_Bps, hidden)
    fwd = stage * forward_fraction(workload)
    stage += host  # backward time: the windows DP buckets and transfers overlap with
    transfer = fill = 0.0
    if pp > 1:
        bytes_ = max(boundary_bytes(workload, p) for p in layer_phases(workload)) / tp
        bytes_ *= max(workload.instances_per_micro_batch, 1)
        hop = hierarchical_time("p2p", bytes_, choice.span("PP"))
        v = max(workload.virtual_pipeline, 1)
        transfer, fill = pipeline_p2p(hop, v, pp, fwd, stage - fwd, hidden)
    stage_total = stage + transfer
    pipeline = pipeline_time(stage_total, m, pp, workload.virtual_pipeline) + fill
    bubble = pipeline - m * stage_total
    params_chip = rank_params(workload) / (tp * pp) if stored is None else stored
    if weights is None:
        weights = StepWeights(self_updated=self_updated_params(workload) / (tp * pp))
    tp_sync = step_sync_s(weights, workload.weight_bytes_per_param, choice.span("TP"))
    tp_sync = 0.0 if workload.forward_only else tp_sync
    dp_time = _dp_sync(workload, choice, params_chip, fwd, stage - fwd, m, hidden).exposed_s
    # ZeRO >= 1: each rank updates only its shard of weights and optimizer state
    shard = zero_shard(workload, choice) if workload.zero_stage >= 1 else 1
    updated = max(params_chip - weights.self_updated, 0.0)  # the graphs update the rest
    opt_bytes = (
        2 * updated * (workload.weight_bytes_per_param + workload.optimizer_bytes_per_param)
        + updated * workload.grad_cast_bytes_per_param
    ) / shard
    optimizer = 0.0 if workload.forward_only else opt_bytes / dram_Bps
    optimizer += grad_cast_floor_s(workload, updated / shard, dram_Bps, cast_elem_per_s)
    gathered = fp8_gathered_shard(workload, choice)
    cast = fp8_weight_cast_s(workload, tp * pp, m, dram_Bps, gathered)
    total = pipeline + dp_time + tp_sync + optimizer + cast
    breakdown = (
        ("pipeline_compute", m * (stage - host)),
        ("pipeline_bubble", bubble),
        ("pp_transfer", transfer * m),
        ("dp_sync_exposed", dp_time),
        ("optimizer", optimizer),
    ) + ((("tp_replica_grad_sync", tp_sync),) if tp_sync > 0 else ())
    breakdown += (("host_exposed", m * host),) if host > 0 else ()
    return StepTimes(
        latency_s=total,
        iteration_time_s=total,
        micro_batches=m,
        bubble_s=bubble,
        dp_allreduce_s=dp_time,
        optimizer_s=optimizer + cast,  # the step-end work: update, then FP8 weight copies
        pp_transfer_s=transfer * m,
        breakdown=(*breakdown, ("fp8_weight_cast", cast)) if cast > 0 else breakdown,
    )


def grad_cast_floor_s(
    workload: Workload, params: float, dram_Bps: float, elem_per_s: float
) -> float:
    """Time the master-gradient cast (LlmTraining.master_grad_cast: `grad.float()`) takes
    beyond its bytes at the DRAM rate: PyTorch's dtype-converting copy runs its unrolled,
    non-vectorized loop (a load and a conversion per element, as the strided elementwise
    kernels do), so `params` elements take at least params / `elem_per_s`."""
    if workload.forward_only or workload.grad_cast_bytes_per_param <= 0 or elem_per_s <= 0:
        return 0.0
    kernel_bytes = workload.weight_bytes_per_param + 4.0  # the gradient read, FP32 written
    return max(params / elem_per_s - params * kernel_bytes / dram_Bps, 0.0)


def _dp_sync(
    workload: Workload,
    choice: Choice,
    params_chip: float,
    fwd_s: float,
    bwd_s: float,
    micro_batches: int,
    hidden: float,
) -> DataParallelSync:
    """The step's DP collectives (solver.search.data_parallel.dp_sync) for this choice: CP
    ranks hold the same weights, so gradients reduce (and ZeRO shards) over DP x CP; under
    EP the dense weights over EP x DP x CP too, the experts (an EP rank's own) over DP x CP."""
    tp, pp = choice.degree("TP"), choice.degree("PP")
    layers_here = sum(stage_layers(workload, p, pp) for p in layer_phases(workload)) or 1
    # FSDP wraps one transformer layer per unit; DDP and ZeRO-1/2 use buckets
    unit = params_chip * workload.weight_bytes_per_param / layers_here
    grads = gradient_bytes(workload) / (tp * pp)
    params = params_chip * gathered_bytes_per_param(workload, choice)
    share = expert_share(workload)
    # a DP collective the run does not overlap (LlmTraining.dp_overlap) hides nothing
    grad_hidden = 0.0 if workload.dp_overlap == "none" else hidden
    param_hidden = hidden if workload.dp_overlap == "all" else 0.0
    experts = None
    if share > 0 and choice.degree("EP") > 1:
        span = choice.span("CP") + choice.span("DP")
        experts = SyncGroup(span, grads * share, params * share)
        grads, params = grads * (1 - share), params * (1 - share)
    return dp_sync(
        workload.zero_stage if choice.weight_replicas() > 1 else 0,
        choice.span("CP") + choice.span("EP") + choice.span("DP"),
        grads,
        params,
        fwd_s,
        bwd_s,
        micro_batches,
        unit if workload.zero_stage >= 3 else BUCKET_BYTES,
        grad_hidden,
        experts=experts,
        param_hidden=param_hidden,
    )


def fp8_weight_elements(workload: Workload) -> float:
    """Weight elements of the FP8 GEMMs of the layer graphs (whole model): the forward GEMMs
    at the workload's math precision (the 16-bit LM head, norms and embeddings excluded)."""
    total = 0.0
    for p in layer_phases(workload):
        for k in p.graph.kernels:
            if k.pass_ == Pass.FWD and k.kind.uses_matrix_unit and not k.math_precision:
                weights = [o for o in k.operands if o.role == OperandRole.WEIGHT]
                total += p.count * sum(k.operand_elements(o) for o in weights)
    return total


def fp8_weight_cast_s(
    workload: Workload, model_split: int, micro: int, dram_Bps: float, gathered: float = 0.0
) -> float:
    """FP8 training casts each 16-bit weight of its FP8 GEMMs to FP8 (and its transpose, for
    the dgrad GEMM) once per step, after the optimizer update (Transformer Engine caches the
    copies over the micro-batches; Megatron's is_first_microbatch): per element an amax read,
    a cast read and two 1-byte writes, 2 x weight bytes + 2 bytes (generator/ops_fp8.py), of
    the chip's 1/model_split (TP x PP) share. ZeRO-3 gathers the weights again for every
    micro-batch, so the copies are cast per micro-batch. With the FP8 parameter all-gather
    (`gathered`: the ZeRO shard count, `fp8_gathered_shard`) a rank casts only its shard
    (amax read, cast read, one 1-byte write) once per step, and every gather's FP8 weights
    get their transpose (a 1-byte read and write). 0 unless the math is FP8 and the weights
    are stored wider."""
    if not _casts_fp8_copies(workload):
        return 0.0
    w = workload.weight_bytes_per_param
    casts = micro if workload.zero_stage >= 3 else 1
    elements = fp8_weight_elements(workload) / model_split
    if gathered > 1:
        shard = elements / gathered * (2 * w + FP8_BYTES)
        return (shard + casts * elements * 2 * FP8_BYTES) / dram_Bps
    return casts * elements * (2 * w + 2 * FP8_BYTES) / dram_Bps


def fp8_gathered_shard(workload: Workload, choice: Choice) -> float:
    """The ZeRO shard count over which the FP8 GEMM weights are gathered in FP8
    (Workload.fp8_param_gather, with a ZeRO stage and more than one data rank), else 0."""
    if not workload.fp8_param_gather or workload.zero_stage < 1 or choice.weight_replicas() <= 1:
        return 0.0
    return zero_shard(workload, choice) if _casts_fp8_copies(workload) else 0.0


def _casts_fp8_copies(workload: Workload) -> bool:
    """FP8 training with weights stored wider than FP8: its GEMMs read FP8 copies."""
    w = workload.weight_bytes_per_param
    return not workload.forward_only and workload.compute_dtype == "FP8" and w > FP8_BYTES


def gathered_bytes_per_param(workload: Workload, choice: Choice) -> float:
    """Bytes per stored parameter the ZeRO parameter all-gather moves: the weight bytes, the
    FP8 GEMM weights at 1 byte under the FP8 parameter all-gather."""
    w = workload.weight_bytes_per_param
    if not fp8_gathered_shard(workload, choice):
        return w
    fp8_share = min(fp8_weight_elements(workload) / max(rank_params(workload), 1.0), 1.0)
    return w - fp8_share * (w - FP8_BYTES)


def inference_times(
    workload: Workload, choice: Choice, phase_latency: dict[str, float]
) -> StepTimes:
    tp, pp = choice.degree("TP"), choice.degree("PP")
    groups: dict[str, float] = {}
    steps: dict[str, int] = {}
    for p in workload.phases:
        kind = "decode" if p.name.startswith("decode") else "prefill"
        if p.name.startswith("chunk"):
            kind = "prefill"
        t = p.count * phase_latency[p.name]
        if pp > 1 and p.role == "layer":
            t += (pp - 1) * hierarchical_time(
                "p2p", boundary_bytes(workload, p) / tp, choice.span("PP")
            )
        if kind == "prefill":  # prefill in passes (prefill_tokens_per_pass): once per pass
            t *= p.steps
        groups[kind] = groups.get(kind, 0.0) + t
        steps[kind] = max(steps.get(kind, 1), p.steps)
    prefill = groups.get("prefill")
    decode = groups.get("decode")
    phase = workload.phase
    tpot = decode
    # the serving runtime's host time per generate call, once (request_overhead_us)
    over = workload.request_overhead_s
    runtime = (("request_overhead", over),) if over > 0 else ()
    if phase == "request":
        e2e = over + (prefill or 0.0) + steps.get("decode", 1) * (decode or 0.0)
        tokens = workload.batch * max(workload.output_len, 1)
        return StepTimes(
            latency_s=e2e,
            ttft_s=over + (prefill or 0.0),
            tpot_s=tpot,
            tokens_per_s=tokens / e2e,
            breakdown=(
                ("prefill", prefill or 0.0),
                ("decode", steps.get("decode", 1) * (decode or 0.0)),
                *runtime,
            ),
        )
    if phase == "decode":
        return StepTimes(
            latency_s=decode or 0.0,
            tpot_s=decode,
            tokens_per_s=workload.batch / (decode or math.inf),
            breakdown=(("decode", decode or 0.0),),
        )
    work = (prefill or 0.0) + (decode or 0.0)
    step = work + over
    # prefill throughput counts the prompt tokens it processes (input tokens/s), as serving
    # benchmarks quote it; decode and whole requests count generated tokens
    tokens_per_step = workload.batch * max(workload.input_len, 1) if phase == "prefill" else 0
    return StepTimes(
        latency_s=step,
        ttft_s=step if phase == "prefill" else None,
        tokens_per_s=(tokens_per_step / step) if tokens_per_step else None,
        breakdown=(("step", work), *runtime),
    )


def one_replica(workload: Workload, replicas: int) -> Workload:
    """A graph workload as each of `replicas` data-parallel replicas runs it: a phase run
    once per batch item (Phase.steps, DFModel's DLRM) takes ceil(steps / replicas) of the
    items (solver.search.infeasible.limits_of); any other workload unchanged."""
    if workload.kind != "graph" or replicas <= 1:
        return workload
    phases = tuple(replace(p, steps=-(-p.steps // replicas)) for p in workload.phases)
    return replace(workload, phases=phases)


def graph_times(
    workload: Workload, phase_latency: dict[str, float], replicas: int = 1
) -> StepTimes:
    """Phases one after another, on each of the data-parallel `replicas` its share of the
    batch items (`one_replica`); a phase with others beside it (Phase.overlaps: HPL's
    look-ahead runs the next panel's factorisation, pivots and broadcast beside the
    trailing update) takes max(its time, the sum of theirs). Breakdown: each phase its own
    time, the phases beside one only their exposed excess max(0, theirs - its), split by
    their times, so the entries add up to the step."""
    workload = one_replica(workload, replicas)
    total_of = {p.name: p.count * p.steps * phase_latency[p.name] for p in workload.phases}
    beside: dict[str, float] = {}
    for p in workload.phases:
        if p.overlaps:
            beside[p.overlaps] = beside.get(p.overlaps, 0.0) + total_of[p.name]
    assert set(beside) <= set(total_of), f"phases beside no phase: {set(beside) - set(total_of)}"
    breakdown = []
    for p in workload.phases:
        own = total_of[p.name]
        if p.overlaps:
            side = beside[p.overlaps]
            exposed = max(0.0, side - total_of[p.overlaps])
            own = exposed * own / side if side > 0 else 0.0
        breakdown.append((p.name, own))
    return StepTimes(latency_s=sum(v for _, v in breakdown), breakdown=tuple(breakdown))
