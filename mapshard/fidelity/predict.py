"""Predict one validation case's metric with MapShard's own model.

- training / inference / layer rows: the solver (through `mapshard.pipeline.plan`) on the row's
  scenario with every parallel degree fixed; the plan's iteration time, TTFT, end-to-end
  latency or layer-graph latency;
- gemm rows: the solver on a one-GEMM workload (the GEMM menu, its efficiency and the
  per-kernel overhead); hpl rows: the solver on the row's HPL (N, NB, P x Q; FP64 unless
  the row says), Rmax = the convention's FLOP / predicted time; attention_fwd rows: the
  solver on a one-attention-kernel workload (workload.attention: a causal forward or
  backward, or a decode step against a KV cache);
- collective rows: `solver.cost.collectives.hierarchical_time` over the row's levels;
- memory_copy rows: DRAM bandwidth x the chip's achievable DRAM fraction.
Times become FLOP-based metrics only through the row's `flop_convention`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.graph import Pass
from generator.moe_layout import in_moe_block
from hardware.system import NetworkLevel, Topology
from mapshard import pipeline
from mapshard.fidelity.cases import Case
from mapshard.fidelity.flops import ConventionError, convention_flop
from mapshard.fidelity.row_settings import check_settings
from mapshard.fidelity.scenarios import (
    KERNEL_KINDS,
    LLM_KINDS,
    TRAINING_KINDS,
    Unmodelable,
    chip_spec,
    load_case_scenario,
    node_size,
    scale_efficiency,
    scale_up_kind,
    scale_up_share,
)
from mapshard.fidelity.stream_case import predict_offline
from mapshard.scenario import Loaded
from schema import setup_pb2
from schema.errors import InfeasibleError
from solver.api import achieved_dram_Bps, hierarchical_time
from solver.plan import PhasePlan, Plan

# Kinds whose prediction is the plan's whole latency: one kernel, or HPL's run
WHOLE_RUN_KINDS = (*KERNEL_KINDS, "hpl")
# Kinds whose scenario prefills a static batch (the prefill-passes fallback applies).
PREFILL_KINDS = ("inference_prefill", "inference_static_batch")
TIME_METRICS = ("kernel_time_s", "iteration_time_s", "ttft_s", "layer_time_s", "collective_time_s")
NOT_PREDICTED = {
    "inference_server": "Poisson arrivals with latency SLOs are not modelled",
}
# the metrics each kind's prediction has (VALIDATION_SCHEMA.md's metric table): a time
# metric is the kind's own unit of work, so ttft_s of a GEMM has no meaning
_TRAINING_METRICS = ("iteration_time_s", "throughput_flops", "mfu", "hfu")
_TOKEN_METRICS = ("tokens_per_s", "tokens_per_s_per_chip")
METRICS_OF_KIND = {
    "gemm": ("kernel_time_s", "throughput_flops"),
    "attention_fwd": ("kernel_time_s", "throughput_flops"),
    "hpl": ("rmax_flops",),
    "training_step": (*_TRAINING_METRICS, *_TOKEN_METRICS),
    "inference_prefill": ("ttft_s",),
    "inference_static_batch": ("ttft_s", *_TOKEN_METRICS),
    "layer_prefill": ("layer_time_s",),
    "layer_decode": ("layer_time_s",),
    "moe_layer": ("layer_time_s",),
}


@dataclass(frozen=True)
class Prediction:
    value: float
    detail: str = ""  # e.g. the predicted time behind a throughput


def predict(case: Case, where: Path) -> Prediction:
    """The row's metric in its SI unit; raises Unmodelable with the reason."""
    if case.kind in NOT_PREDICTED:
        raise Unmodelable(NOT_PREDICTED[case.kind])
    check_settings(case)  # a run setting the model does not run: not modelled, named
    allowed = METRICS_OF_KIND.get(case.kind)
    if allowed is not None and case.metric not in allowed:
        raise Unmodelable(
            f"metric {case.metric!r} is not modelled for kind {case.kind} "
            f"(modelled: {', '.join(allowed)})"
        )
    if case.kind == "memory_copy":
        return _memory_copy(case, where)
    if case.kind == "collective":
        return _collective(case)
    if case.kind == "inference_offline_throughput":
        return Prediction(*predict_offline(case, where))
    if case.kind in WHOLE_RUN_KINDS or case.kind in LLM_KINDS:
        return _solved(case, where)
    raise Unmodelable(f"kind {case.kind!r} is not a kind of the schema")


# ---------------------------------------------------------------------------------------
# Kernels and memory
# ---------------------------------------------------------------------------------------


def _memory_copy(case: Case, where: Path) -> Prediction:
    if case.metric != "bandwidth_Bps":
        raise Unmodelable(f"memory_copy metric {case.metric!r} is not bandwidth_Bps")
    setup = setup_pb2.Setup()
    setup.system.chip = chip_spec(case).name
    setup.system.num_chip = 1
    system = pipeline.resolve(Loaded(setup, where))  # hardware only: no workload
    return Prediction(achieved_dram_Bps(system.chip, system.dram.bandwidth_Bps))


# ---------------------------------------------------------------------------------------
# Collectives
# ---------------------------------------------------------------------------------------

_BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def collective_span(case: Case) -> list[tuple[NetworkLevel, int]]:
    """The row's chips as levels: one scale-up level, plus a scale-out level across nodes."""
    spec = chip_spec(case)
    n = case.int("num_chips")
    if n < 2:
        raise Unmodelable("a collective needs num_chips >= 2")
    node = min(node_size(case, spec), n)
    if n % node:
        raise Unmodelable(f"num_chips {n} is not a multiple of chips_per_node {node}")
    if spec.scale_up_bw_GBps <= 0:  # as `mapshard run` says for a system of several chips
        raise Unmodelable(f"chip {spec.name!r} has no scale_up_bw_GBps: no link to time")
    span = [
        (
            NetworkLevel(
                "node",
                scale_up_kind(case, spec),
                node,
                spec.scale_up_bw_GBps * 1e9 * scale_up_share(case, spec, node),
                spec.scale_up_latency_us * 1e-6,
                efficiency=scale_efficiency(spec, True),
            ),
            node,
        )
    ]
    if n > node:
        bw = spec.scale_out_bw_GBps or spec.scale_up_bw_GBps
        span.append(
            (
                NetworkLevel(
                    "net",
                    Topology.SWITCH,
                    n // node,
                    bw * 1e9,
                    spec.scale_out_latency_us * 1e-6,
                    efficiency=scale_efficiency(spec, False),
                ),
                n // node,
            )
        )
    return span


def collective_time(case: Case) -> float:
    kind = case.text("collective")
    if kind not in _BUS_FACTOR:
        raise Unmodelable(
            f"collective {kind!r} is not all_reduce/all_gather/reduce_scatter/all_to_all"
        )
    size = case.float("message_bytes")
    if size <= 0:
        raise Unmodelable("collective row without message_bytes")
    n = case.int("num_chips")
    total = size * n if kind == "all_to_all" else size  # solver: all-to-all size = p x share
    return hierarchical_time(kind, total, collective_span(case))


def _collective(case: Case) -> Prediction:
    t = collective_time(case)
    size = case.float("message_bytes")
    n = case.int("num_chips")
    if case.metric == "collective_time_s":
        return Prediction(t)
    if case.metric == "bus_bandwidth_Bps":
        return Prediction(size / t * _BUS_FACTOR[case.text("collective")](n), f"t={t:.4g}s")
    if case.metric == "algorithm_bandwidth_Bps":
        return Prediction(size / t, f"t={t:.4g}s")
    raise Unmodelable(f"collective metric {case.metric!r} is not modelled")


# ---------------------------------------------------------------------------------------
# Solved scenarios (gemm, training, inference, layers)
# ---------------------------------------------------------------------------------------


def _plan_in_memory(case: Case, where: Path) -> tuple[Plan, str]:
    """The row's plan; for a static-batch prefill whose activations do not fit when the whole
    batch is one forward pass, the fewest passes that fit: the batch was measured, so the
    engine prefilled it in parts (TensorRT-LLM's max_num_tokens, a graph compiler splitting
    the first-token graph). Passes of ceil(batch / 2^j) sequences, j = 1, 2, ... (a row's
    own max_num_tokens is tried first and kept when it fits)."""
    try:
        return pipeline.plan(load_case_scenario(case, where)), ""
    except InfeasibleError as exc:
        batch, ilen = case.int("batch", 1), case.int("input_len")
        if exc.resource != "DRAM capacity" or case.kind not in PREFILL_KINDS or batch < 2:
            raise
        first = exc
    seqs = batch
    while seqs > 1:
        seqs = -(-seqs // 2)
        try:
            scenario = load_case_scenario(case, where, prefill_tokens_per_pass=seqs * ilen)
            passes = -(-batch // seqs)
            return pipeline.plan(scenario), f"; prefill in {passes} passes (whole batch: OOM)"
        except InfeasibleError as exc:
            if exc.resource != "DRAM capacity":
                raise
    raise first


def _solved(case: Case, where: Path) -> Prediction:
    if case.kind in PREFILL_KINDS and case.int("batch", 1) > 1:
        p, note = _plan_in_memory(case, where)
    else:
        p, note = pipeline.plan(load_case_scenario(case, where)), ""
    kind = case.kind
    if kind in LLM_KINDS and kind not in TRAINING_KINDS and case.int("tp", 1) > 1:
        note += "; engine TP split"
    if kind in WHOLE_RUN_KINDS:
        t = p.latency_s
    elif kind == "training_step":
        t = p.iteration_time_s or p.latency_s
    elif kind == "inference_prefill":
        t = p.ttft_s or p.latency_s
    elif kind == "inference_static_batch":
        t = p.latency_s
        if case.metric == "ttft_s":
            if p.ttft_s is None:
                raise Unmodelable("the plan has no time to first token")
            t = p.ttft_s
    elif kind == "moe_layer":
        t = moe_block_s(p, case.extra.get("pass", ""))
    else:  # layer rows: the layer graph(s) only, not the embedding / LM head
        t = sum(ph.latency_s * ph.count * ph.steps for ph in p.phases if ph.role == "layer")
    return Prediction(metric_from_time(case, t, p.peak_flops_per_chip), f"t={t:.4g}s{note}")


# a moe_layer row's pass (extra_params `pass`) -> the graph passes its kernels run in
MOE_PASSES = {"fwd": (Pass.FWD,), "bwd": (Pass.BWD, Pass.WGRAD, Pass.RECOMPUTE)}


def moe_block_s(plan: Plan, which: str) -> float:
    """One micro-batch's time of the layer's MoE block in pass `which` (fwd; bwd: input and
    weight gradients and a recomputed forward, which autograd's backward runs), kernel by
    kernel: the configurations of the layer graph whose kernels are all the block's and run
    in that pass. Not in it, though Megatron's MoELayer runs them: the sum of the gradients
    reaching the block's input (the graph names it after the norm before: one elementwise
    kernel) and the router's backward and FP32 cast, which the graph does not model (about
    1-2% of a block)."""
    if which not in MOE_PASSES:
        raise Unmodelable(f"pass={which} is not fwd or bwd")
    layers = [ph for ph in plan.phases if ph.role == "layer"]
    if len(layers) != 1:
        raise Unmodelable(f"{len(layers)} layer graphs: a moe_layer row times one")
    return _block_s(layers[0], MOE_PASSES[which])


def _block_s(phase: PhasePlan, passes: tuple[Pass, ...]) -> float:
    pass_of = {k.name: k.pass_ for k in phase.kernels}
    total, found = 0.0, False
    for c in phase.configs:
        inside = [in_moe_block(n) and pass_of[n] in passes for n in c.kernels]
        if any(inside) and not all(inside):
            raise Unmodelable(f"configuration {c.index} fuses MoE-block kernels with others")
        if inside and all(inside):
            total, found = total + c.latency_s, True
    if not found:
        raise Unmodelable("the layer has no MoE block")
    return total


def _tokens(case: Case) -> float:
    if case.kind == "training_step":
        return case.float("global_batch") * case.float("seq_len")
    counted = case.extra.get("tokens_counted", "output")
    if counted not in ("output", ""):
        raise Unmodelable(f"tokens_counted={counted} is not modelled (output tokens only)")
    tokens = case.float("batch", 1) * case.float("output_len", 1)
    if tokens <= 0:
        raise Unmodelable("batch x output_len is 0: no generated tokens to count")
    return tokens


def metric_from_time(case: Case, t: float, chip_peak: float) -> float:
    """The row's metric from the predicted time of its unit of work."""
    metric = case.metric
    chips = max(1, case.int("num_chips", 1))
    if metric in TIME_METRICS:
        return t
    try:
        if metric == "throughput_flops":
            return convention_flop(case) / (t * chips)
        if metric == "rmax_flops":  # HPL's Rmax: the whole run's FLOP/s
            return convention_flop(case) / t
        if metric in ("mfu", "hfu"):
            peak = (
                case.extra_float("peak_flops_in_mfu")
                or case.extra_float("peak_flops_per_chip")
                or chip_peak
            )
            return convention_flop(case, hardware=metric == "hfu") / (t * chips * peak)
    except ConventionError as exc:
        raise Unmodelable(str(exc)) from exc
    if metric == "tokens_per_s":
        return _tokens(case) / t
    if metric == "tokens_per_s_per_chip":
        return _tokens(case) / (t * chips)
    raise Unmodelable(f"metric {metric!r} is not modelled for kind {case.kind}")
