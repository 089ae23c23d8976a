"""One validation case -> a MapShard setup, and the scenario `mapshard run` makes of it.

The setup is an ordinary `Setup` message, the file a user would write: every parallel degree
is a tag on the topology levels (one parallelism may span two levels, e.g. a DP group of 32
= 8 in a node x 4 nodes: both levels carry DP), each level's collective efficiency is the
chip file's entry for its scale (`system.accelerator.efficiency.collective` by level), and
every extra_params key the prediction reads sets a setup field (row_keys.SETUP_KEYS). The
scenario is then built by the pipeline's own stages from that setup alone, so `mapshard run`
of the written setup predicts the same time (tests/e2e/test_validate_as_run.py).

The attention implementation (fused or unfused) and dropout follow the row's software
stack, read from its fields (`attention_impl`).

Placement follows Megatron-LM's rank order: TP innermost, then CP, DP, PP; each group takes
what is left of the node (the scale-up domain, `chips_per_node`) before crossing to the
scale-out network. Every in-node level gets the chip's scale-up link bandwidth and the
chip file's collective efficiency for level 0, every cross-node level the scale-out ones
(level 1): the chip file's level index means the chip's default topology (scale-up, then
scale-out), whatever sub-levels a scenario splits it into.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hardware import library
from hardware.system import CollectiveEfficiency, Topology
from hardware.topology import collective_efficiency
from mapshard import pipeline
from mapshard.fidelity.cases import GRAPH_TIMING, Case, Unmodelable
from mapshard.fidelity.engines import (  # noqa: F401  (the row's stack, re-exported)
    ATTENTION_OP_KEYS,
    MEGATRON_DROPOUT,
    TRTLLM_SESSION_REQUEST_OVERHEAD_US,
    TRTLLM_XQA_VERSION,
    attention_impl,
    decode_attention,
    eager_ops,
    edges_in_pipeline_split,
    fp8_param_gather,
    grad_reduce_fp32,
    host_op_us,
    kv_reread_dram_share,
    master_grad_cast,
    moe_dispatcher,
    moe_gemm,
    moe_permute,
    request_overhead_us,
    tensor_parallel_split,
    training_kernels,
    trtllm_dequantized_fp8,
)
from mapshard.fidelity.flops import attention_pass
from mapshard.fidelity.row_model import row_model
from mapshard.fidelity.training_row import (  # noqa: F401  (ZERO1_KEYS re-exported)
    ZERO1_KEYS,
    dp_overlap,
    expert_layout,
    virtual_pipeline,
    zero_stage,
)
from mapshard.pipeline import Scenario
from schema import setup_pb2

DTYPES = {
    "fp32": "FP32",
    "tf32": "TF32",
    "fp16": "FP16",
    "bf16": "BF16",
    "fp8": "FP8",
    "fp64": "FP64",
    "int8": "INT8",
}
RECOMPUTE = {
    "": setup_pb2.RECOMPUTE_NONE,
    "none": setup_pb2.RECOMPUTE_NONE,
    "selective": setup_pb2.RECOMPUTE_SELECTIVE,
    "full": setup_pb2.RECOMPUTE_FULL,
}
KERNEL_KINDS = ("gemm", "attention_fwd")  # one kernel on one chip
# a training step and one training layer's MoE block (moe_layer rows) share their setup
TRAINING_KINDS = ("training_step", "moe_layer")
LLM_KINDS = (
    "training_step",
    "moe_layer",
    "inference_prefill",
    "inference_static_batch",
    "layer_prefill",
    "layer_decode",
)


@dataclass(frozen=True)
class LevelSpec:
    """One topology level of a case: degree, the parallelism on it, in-node or not."""

    name: str
    degree: int
    tag: str
    scale_up: bool


def chip_spec(case: Case) -> setup_pb2.ChipSpec:
    spec = library.find_chip(case.text("chip"))
    if spec is None:
        raise Unmodelable(f'chip "{case.text("chip")}" is not in the hardware library')
    return spec


def node_size(case: Case, spec: setup_pb2.ChipSpec) -> int:
    """Chips sharing the scale-up fabric (the row's chips_per_node, else the chip's domain)."""
    return case.int("chips_per_node") or spec.scale_up_domain or case.int("num_chips", 1)


def scale_up_kind(case: Case, spec: setup_pb2.ChipSpec) -> Topology:
    """NVSwitch boards are switches; 4-GPU HGX A100 boards, AMD Infinity Fabric platforms and
    Intel HLS-Gaudi servers (21 RoCE ports all-to-all, 3 to each of the 7 peers; Gaudi 2/3
    white papers) are fully connected (direct links between every pair of chips)."""
    if spec.vendor in ("AMD", "Intel") or (
        spec.name.startswith("A100") and node_size(case, spec) <= 4
    ):
        return Topology.FULLY_CONNECTED
    if spec.vendor == "Google":
        return Topology.RING
    return Topology.SWITCH


def scale_up_share(case: Case, spec: setup_pb2.ChipSpec, degree: int) -> float:
    """Share of a chip's scale-up bandwidth a group of `degree` chips of its node can use.

    On a switch every chip reaches any peer at its full bandwidth: 1. In a fully connected
    node of N chips each chip's links are spread evenly over its N - 1 peers, so a group of
    d chips uses only the links to its d - 1 peers: (d - 1) / (N - 1) (TP 2 on an 8-chip
    Gaudi or MI300X node: 1/7 of the aggregate)."""
    if scale_up_kind(case, spec) != Topology.FULLY_CONNECTED:
        return 1.0
    n = node_size(case, spec)
    return (degree - 1) / (n - 1) if 1 < degree < n else 1.0


# Megatron-LM's rank order, innermost first (context parallel next to tensor parallel, the
# expert-parallel ranks carved from the data-parallel ones next)
RANK_ORDER = ("TP", "CP", "EP", "DP", "PP")


def place_degrees(degrees: dict[str, int], num_chips: int, node: int) -> list[LevelSpec]:
    """Levels innermost first: TP, DP, PP fill the node, the rest crosses nodes."""
    if math.prod(degrees.values()) != num_chips:
        shown = "x".join(f"{k.lower()}{v}" for k, v in degrees.items())
        raise Unmodelable(f"parallel degrees {shown} do not multiply to num_chips {num_chips}")
    left = min(node, num_chips)
    inner: dict[str, int] = {}
    for name in RANK_ORDER:
        take = math.gcd(degrees.get(name, 1), left)
        inner[name] = take
        left //= take
    levels = [LevelSpec(f"node_{n.lower()}", d, n, True) for n, d in inner.items() if d > 1]
    for name in RANK_ORDER:
        rest = degrees.get(name, 1) // inner[name]
        if rest > 1:
            levels.append(LevelSpec(f"net_{name.lower()}", rest, name, False))
    return levels


def case_levels(case: Case, spec: setup_pb2.ChipSpec) -> list[LevelSpec]:
    if case.kind == "hpl":  # one process per chip; the P x Q grid is the workload's
        n = case.int("num_chips", 1)
        return place_degrees({"TP": n}, n, node_size(case, spec))
    degrees = {k.upper(): max(case.int(k, 1), 1) for k in ("tp", "cp", "dp", "pp")}
    ep, _, ep_tags = expert_layout(case)
    if ep > 1:
        # the row's dp counts every data-parallel rank, the EP ones included (Megatron-LM);
        # a folded EP group (ETP 1) takes TP of its ranks from the TP chips
        if case.kind not in TRAINING_KINDS:
            raise Unmodelable(f"EP={ep} outside training is not modelled by the scenario builder")
        dp = degrees["DP"]
        if dp % ep_tags:
            raise Unmodelable(f"EP={ep} ({ep_tags} data-rank groups) does not divide dp {dp}")
        degrees["EP"], degrees["DP"] = ep_tags, degrees["DP"] // ep_tags
    return place_degrees(degrees, case.int("num_chips", 1), node_size(case, spec))


# ---------------------------------------------------------------------------------------
# Setups
# ---------------------------------------------------------------------------------------


def _precision(case: Case, msg: setup_pb2.Precision) -> None:
    """GEMM inputs in the row's precision; FP8 rows keep 16-bit activations between kernels
    (the schema: "FP8 GEMMs, higher-precision elsewhere") and take weights/KV types from
    extra_params when given."""
    prec = case.text("precision") or "bf16"
    if prec not in DTYPES:
        raise Unmodelable(f"precision {prec!r} is not one of {', '.join(DTYPES)}")
    math_t = DTYPES[prec]
    act = "BF16" if prec == "fp8" else math_t
    # FP8 training keeps 16-bit parameters and gradients (Transformer Engine casts an FP8
    # copy of each weight for its GEMMs); FP8 inference engines store FP8 weights
    stored = act if case.kind in TRAINING_KINDS else math_t
    weight = DTYPES.get(case.extra.get("weights_dtype", ""), stored)
    if prec == "fp8" and trtllm_dequantized_fp8(case):
        math_t = weight = act
    kv = DTYPES.get(case.extra.get("kv_cache_dtype", ""), act)
    msg.weight = setup_pb2.DType.Value(weight)
    msg.activation = setup_pb2.DType.Value(act)
    msg.kv_cache = setup_pb2.DType.Value(kv)
    msg.math = setup_pb2.DType.Value(math_t)


def _system(
    case: Case, spec: setup_pb2.ChipSpec, setup: setup_pb2.Setup, levels: list[LevelSpec]
) -> None:
    setup.system.chip = spec.name
    setup.system.num_chip = max(1, case.int("num_chips", 1))
    kind = {
        Topology.SWITCH: setup_pb2.SWITCH,
        Topology.RING: setup_pb2.RING,
        Topology.FULLY_CONNECTED: setup_pb2.FULLY_CONNECTED,
    }[scale_up_kind(case, spec)]
    # the run's own network and memory where the row states them (extra_params)
    scale_out_GBps = case.extra_float("scale_out_bw_Bps") / 1e9 or spec.scale_out_bw_GBps
    if case.extra_float("hbm_bw_Bps") > 0:
        setup.system.memory.dram_bw = case.extra_float("hbm_bw_Bps") / 1e9
    if case.extra_float("hbm_capacity_bytes") > 0:
        setup.system.memory.dram_cap = case.extra_float("hbm_capacity_bytes")
    efficiency = setup.system.accelerator.efficiency
    for i, lv in enumerate(levels):
        t = setup.system.topology.add()
        t.name = lv.name
        t.degree = lv.degree
        t.kind = kind if lv.scale_up else setup_pb2.SWITCH
        t.parallelism.append(lv.tag)
        bw = spec.scale_up_bw_GBps if lv.scale_up else scale_out_GBps
        t.link_bw_GBps = bw or spec.scale_up_bw_GBps
        if lv.scale_up:
            t.link_bw_GBps *= scale_up_share(case, spec, lv.degree)
        lat = spec.scale_up_latency_us if lv.scale_up else spec.scale_out_latency_us
        t.latency_us = lat
        # the chip file's level index is its default topology's (0 scale-up, 1 scale-out),
        # whatever sub-levels the case splits it into: each level gets its scale's entry (an
        # empty one, the uncalibrated default, where the chip has none for that scale)
        if spec.accelerator.efficiency.collective:
            entry = efficiency.collective.add()
            entry.CopyFrom(scale_entry(spec, lv.scale_up) or entry)
            entry.level = i


def _gemm(case: Case, g: setup_pb2.Gemm) -> None:
    """C[m,n] = A[m,k] B[k,n], `batch` independent ones when the row gives a batch (a
    batched GEMM, one kernel). An FP8 GEMM reads 1-byte inputs and writes a 16-bit C (as
    cuBLASLt's FP8 GEMMs do); the setup has one activation type for A and C, so the larger
    input becomes the FP8 weight operand (the GEMM transposed when A is the larger) and the
    smaller input is counted at 2 bytes."""
    m, k, n = case.int("m"), case.int("k"), case.int("n")
    if min(m, k, n) <= 0:
        raise Unmodelable("gemm row without m, k and n")
    if case.text("precision") == "fp8" and m > n:
        m, n = n, m
    g.M, g.K, g.N = m, k, n
    g.batch = case.int("batch", 1)  # unset or 0: one (generator.requests.request_batch)
    g.weight_operand = case.text("precision") == "fp8"


def _attention(case: Case, a: setup_pb2.Attention) -> None:
    """One fused attention kernel: a decode step against the KV cache where the row gives
    `kv_len` and no `seq_len` (one query token per sequence), else a causal self-attention
    of `seq_len` tokens, forward or (extra_params `attn_pass=bwd`, flops.attention_pass)
    its backward."""
    a.batch, a.heads, a.head_dim = case.int("batch", 1), case.int("heads"), case.int("head_dim")
    a.kv_heads = case.int("kv_heads")
    if case.int("kv_len") > 0 and case.int("seq_len") <= 0:
        a.q_len, a.kv_len = 1, case.int("kv_len")
        a.decode_attention = decode_attention(case)
        return
    if case.extra.get("causal", "") != "1":
        raise Unmodelable("non-causal attention is not modelled (a decoder layer's is causal)")
    passes = attention_pass(case)
    if passes not in ("fwd", "bwd"):
        raise Unmodelable(f"attn_pass={passes} is not one kernel pass (fwd or bwd)")
    a.q_len = case.int("seq_len")
    a.backward = passes == "bwd"


def tp_comm_overlap(case: Case) -> bool:
    """Whether the run's recipe overlaps its tensor-parallel collectives with the GEMMs
    (extra_params `tp_comm_overlap`=1: NeMo's `ub_tp_comm_overlap` / MegatronCommOverlapCallback
    `tp_comm_overlap`, Transformer Engine userbuffers), the recipe cited in the row's notes.
    Such a row runs with Execution.tp_comm_overlap: each kernel's collective hides under its
    work by the chip's calibrated tp_comm_hidden_share. Only with TP > 1."""
    given = case.extra.get("tp_comm_overlap", "")
    if given not in ("", "0", "1"):
        raise Unmodelable(f"tp_comm_overlap={given} is not 0 or 1")
    return given == "1" and case.int("tp", 1) > 1


def _hpl(case: Case, h: setup_pb2.Hpl) -> None:
    """N, NB and the P x Q grid from extra_params (hpl_n, hpl_nb, hpl_p, hpl_q): whole
    numbers (int_extra: a negative or non-numeric one is said as such, not as missing)."""
    n, nb = case.int_extra("hpl_n"), case.int_extra("hpl_nb")
    if n <= 0 or nb <= 0:
        raise Unmodelable("hpl row without extra_params hpl_n and hpl_nb (whole numbers > 0)")
    h.N, h.B = n, nb
    h.X, h.Y = case.int_extra("hpl_p"), case.int_extra("hpl_q")
    if case.extra.get("hpl_depth", ""):
        h.depth = case.int_extra("hpl_depth")


def _workload(case: Case, setup: setup_pb2.Setup) -> None:
    kind = case.kind
    if kind == "hpl":
        _hpl(case, setup.workload.hpl)
        if case.text("precision"):  # else HPL's default, FP64
            _precision(case, setup.workload.precision)
        return
    if kind == "gemm":
        _gemm(case, setup.workload.gemm)
    elif kind == "attention_fwd":
        _attention(case, setup.workload.attention)
    elif kind in TRAINING_KINDS:
        t = setup.workload.llm_training
        row_model(case, t.model)
        t.global_batch = case.int("global_batch")
        t.micro_batch = case.int("micro_batch", 1)
        t.seq_len = case.int("seq_len")
        rec = case.text("recompute")
        if rec not in RECOMPUTE:
            raise Unmodelable(f"recompute {rec!r} is not none/selective/full")
        t.recompute = RECOMPUTE[rec]
        t.sequence_parallel = case.int("sequence_parallel") == 1
        t.virtual_pipeline = virtual_pipeline(case)
        t.zero_stage = zero_stage(case)
        t.dp_overlap = dp_overlap(case)
        t.context_parallel = max(case.int("cp", 1), 1)
        t.expert_parallel, t.expert_tensor_parallel, _ = expert_layout(case)
        t.fp8_param_gather = fp8_param_gather(case)
        t.grad_reduce_fp32 = grad_reduce_fp32(case)
        t.attention, t.dropout = attention_impl(case)
        t.eager_activation, t.loss = training_kernels(case)
        t.eager_rope = eager_ops(case)[1]
        t.master_grad_cast = master_grad_cast(case)
        t.moe_gemm, t.moe_permute = moe_gemm(case), moe_permute(case)
        t.moe_dispatcher = moe_dispatcher(case)
        t.edges_in_pipeline_split = edges_in_pipeline_split(case)
    else:
        i = setup.workload.llm_inference
        row_model(case, i.model)
        i.batch = case.int("batch", 1)
        i.input_len = case.int("input_len")
        i.output_len = case.int("output_len")
        i.attention, _ = attention_impl(case)
        i.decode_attention = decode_attention(case)
        i.kv_reread_dram_share = kv_reread_dram_share(case, i.decode_attention)
        i.tensor_parallel_split = tensor_parallel_split(case)
        i.prefill_tokens_per_pass = case.int_extra("max_num_tokens")
        i.request_overhead_us = request_overhead_us(case)
        i.eager_activation, i.eager_rope = eager_ops(case)
        i.moe_gemm, i.moe_permute = moe_gemm(case), moe_permute(case)
        if kind in ("inference_prefill", "layer_prefill"):
            i.phase = setup_pb2.PREFILL
        elif kind == "inference_static_batch":
            i.phase = setup_pb2.REQUEST if i.output_len > 1 else setup_pb2.PREFILL
        else:
            i.phase = setup_pb2.DECODE
            i.context_len = case.int("kv_len") or i.input_len
            if i.context_len <= 0:
                raise Unmodelable("layer_decode row without kv_len or input_len")
    _precision(case, setup.workload.precision)


VALIDATE_TIME_LIMIT_S = 600


def build_setup(case: Case) -> tuple[setup_pb2.Setup, list[LevelSpec]]:
    """The scenario a row describes, as a Setup, and the levels' parallelism tags."""
    spec = chip_spec(case)
    levels = [] if case.kind in KERNEL_KINDS else case_levels(case, spec)
    setup = setup_pb2.Setup()
    setup.name = f"validate_{case.id}"
    _workload(case, setup)
    _system(case, spec, setup, levels)
    # the kernel-time source (extra_params kernel_source=...; unset: the chip's default,
    # "none": the physical model alone, mapshard.fidelity.sources)
    setup.system.kernel_source = case.extra.get("kernel_source", "")
    # the fused causal attention kernel family (unset: the chip's default, cuDNN on Hopper)
    if case.extra.get("attention_kernel"):
        setup.execution.attention_kernel = case.extra["attention_kernel"]
    # kernels replayed from a CUDA graph: no host launch pacing, no GEMM launch floor
    if case.extra.get("timing", "") == GRAPH_TIMING:
        setup.execution.cuda_graph = True
    # PyTorch eager from Python: a loop right after a sync waits on the host
    host_us = host_op_us(case)
    if host_us > 0:  # set only then: a row without it keeps no execution block
        setup.execution.host_op_us = host_us
    # no overlap set: kernel by kernel with the chip's calibrated overlap (ChipSpec.overlap;
    # GPUs SERIAL_NETWORK), exactly what `mapshard run` of the same setup assumes; a recipe
    # that overlaps its TP collectives says so (an execution block whose overlap stays
    # unset: the chip's mode still wins over the no-block default, overlap_mode)
    if tp_comm_overlap(case):
        setup.execution.tp_comm_overlap = True
    # the deterministic work budgets decide each row's plan; the wall clock is only the
    # safety valve, set well above the slowest row (a large training step's memory split:
    # ~25 CPU-s) so that a loaded machine predicts the same numbers as an idle one
    setup.solver.time_limit_s = VALIDATE_TIME_LIMIT_S
    return setup, levels


def scale_entry(spec: setup_pb2.ChipSpec, scale_up: bool) -> setup_pb2.CollectiveEfficiency | None:
    """The chip file's collective efficiency entry for its scale-up (level 0) or scale-out
    (level 1) network; None when it has none."""
    want = 0 if scale_up else 1
    for entry in spec.accelerator.efficiency.collective:
        if entry.level == want:
            return entry
    return None


def scale_efficiency(spec: setup_pb2.ChipSpec, scale_up: bool) -> CollectiveEfficiency:
    """`scale_entry` resolved (the default, uncalibrated one when the chip has none)."""
    entry = scale_entry(spec, scale_up)
    return CollectiveEfficiency() if entry is None else collective_efficiency(entry)


def load_setup_scenario(setup: setup_pb2.Setup, where: Path) -> Scenario:
    """A setup's scenario by the stages `mapshard run` goes through: load (validate),
    resolve, generate, assemble."""
    loaded = pipeline.load_message(setup, where)
    system = pipeline.resolve(loaded)
    return pipeline.assemble(loaded, system, pipeline.generate(loaded, system))


def load_case_scenario(case: Case, where: Path, prefill_tokens_per_pass: int = 0) -> Scenario:
    """The row's scenario: its setup (build_setup) as `mapshard run` would load it; the
    per-kernel sharding is searched, as `mapshard run` would. `prefill_tokens_per_pass` > 0
    overrides the row's prefill token budget (extra_params max_num_tokens)."""
    setup, _ = build_setup(case)
    if prefill_tokens_per_pass > 0:
        setup.workload.llm_inference.prefill_tokens_per_pass = prefill_tokens_per_pass
    return load_setup_scenario(setup, where)
