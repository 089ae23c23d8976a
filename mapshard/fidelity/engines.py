"""What a validation row's software stack does, read from its fields: the serving engine's
tensor-parallel split, decode attention, runtime overhead and FP8 path, and the attention
implementation of a training stack. Each rule names the engine behaviour it follows; the
constants fitted to measurements say on which FIT rows (never a CHECK row)."""

from __future__ import annotations

import math
from collections.abc import Callable

from mapshard.fidelity.cases import Case, Unmodelable
from schema import setup_pb2

# Megatron-LM's GPT default dropout (--attention-dropout, --hidden-dropout) in the
# Megatron-era runs below.
MEGATRON_DROPOUT = 0.1
# extra_params keys of rows that timed the attention core op by op (LLMCompass layer rows).
ATTENTION_OP_KEYS = ("op_qk_s", "op_softmax_s", "op_av_s")


def trtllm_dequantized_fp8(case: Case) -> bool:
    """An FP8 checkpoint that TensorRT-LLM ran through 16-bit GEMMs: its FP8Linear /
    FP8RowLinear layers (tensorrt_llm/quantization/layers.py) use the FP8 GEMM only with
    `gemm_plugin` (or low_latency_gemm_plugin) `fp8`; with any other plugin setting they
    dequantize the activations and the FP8 weights to the model dtype and multiply in it.
    `--gemm_plugin auto` means the model dtype (PluginConfig), float16 for a checkpoint
    quantized with `--dtype float16`. The row says which through extra_params
    `gemm_plugin` (the build flag of its harness); rows without it keep FP8 GEMMs. The
    dequantized weights are a constant the engine builder folds, so they are read at 16
    bits; the KV cache keeps its own type (the attention plugin's FP8 cache)."""
    plugin = case.extra.get("gemm_plugin", "")
    return case.extra.get("engine") == "TensorRT-LLM" and plugin not in ("", "fp8")


def attention_impl(case: Case) -> tuple[int, float]:
    """(AttentionImpl, dropout probability) of the row's software stack, from its fields:
    - extra_params `attention_impl=fused|unfused` (and `dropout=<p>`) when the row says;
    - unfused when the row timed the attention core op by op (op_qk_s, op_softmax_s,
      op_av_s: the QK^T, softmax and AV kernels were separate);
    - unfused with Megatron-LM's dropout 0.1 for Megatron-LM training runs from before fused
      attention kernels: rows counted with the megatron_sc21_eq3 convention (Narayanan et al.
      2021) and rows carrying Calculon's flags (calculon_*: Korthikanti et al. 2022, whose
      Calculon block is QK^T, softmax, dropout, AV as separate layers);
    - fused without dropout otherwise (FlashAttention-era stacks: TensorRT-LLM's context
      FMHA, NeMo, ...)."""
    unfused = setup_pb2.UNFUSED_ATTENTION
    dropout = case.extra_float("dropout")
    given = case.extra.get("attention_impl", "")
    if given:
        if given not in ("fused", "unfused"):
            raise Unmodelable(f"attention_impl={given} is not fused/unfused")
        return (unfused if given == "unfused" else setup_pb2.FUSED_ATTENTION), dropout
    if all(k in case.extra for k in ATTENTION_OP_KEYS):
        return unfused, dropout
    megatron = case.text("flop_convention") == "megatron_sc21_eq3" or any(
        k.startswith("calculon_") for k in case.extra
    )
    if case.kind in ("training_step", "moe_layer") and megatron:
        return unfused, dropout or MEGATRON_DROPOUT
    return setup_pb2.FUSED_ATTENTION, dropout


# TensorRT-LLM's first release with XQA generation kernels for GQA/MQA models (its XQA blog,
# docs/source/blogs/XQA-kernel.md; NVIDIA/TensorRT-LLM issue #1240 tests it on 0.8.0; the
# Hopper XQA kernels for Llama-2-70B followed in 0.10.0). Before it the masked-MHA generation
# kernel ran one thread block per query head, each reading its KV head from memory.
TRTLLM_XQA_VERSION = (0, 8)
# What XQA covers. The 0.8 runner (DecoderXQARunner::shouldUse in
# cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQARunner.h) takes head
# size 128 and exactly 8 query heads per KV head (its precompiled cubins are nqpkv_8); any
# other model falls back to the masked-MHA kernel. From the release whose notes add the XQA
# JIT codepath (0.11.0: "Added Hopper qgmma kernel to XQA JIT codepath") this model assumes
# XQA compiles for any group size of 2 or more, head size 128 or 256 (the later runner's
# check); an assumption, not checked against a release's kernels.
TRTLLM_XQA_HEAD_DIMS = (128,)
TRTLLM_XQA_GROUP = 8
TRTLLM_XQA_ANY_GROUP_VERSION = (0, 11)
TRTLLM_XQA_ANY_GROUP_HEAD_DIMS = (128, 256)


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split("."))
    except ValueError as exc:
        raise Unmodelable(f"engine_version={text} is not a dotted version number") from exc


def trtllm_xqa(case: Case, version: tuple[int, ...]) -> bool:
    """Whether TensorRT-LLM `version` runs the row's decode attention with XQA (the
    group-aware kernel) rather than the masked-MHA kernel (per query head): the release
    has XQA and XQA covers the model's head size and query heads per KV head."""
    if version < TRTLLM_XQA_VERSION:
        return False
    heads, kv_heads, head_dim = case.int("heads"), case.int("kv_heads"), case.int("head_dim")
    if heads <= 0 or kv_heads <= 0 or head_dim <= 0:
        raise Unmodelable("engine_version needs heads, kv_heads and head_dim (XQA coverage)")
    group = heads // kv_heads
    if version >= TRTLLM_XQA_ANY_GROUP_VERSION:
        return group >= 2 and head_dim in TRTLLM_XQA_ANY_GROUP_HEAD_DIMS
    return group == TRTLLM_XQA_GROUP and head_dim in TRTLLM_XQA_HEAD_DIMS


DECODE_ATTENTION = {
    "kv_shared": setup_pb2.KV_SHARED,
    "kv_per_query_head": setup_pb2.KV_PER_QUERY_HEAD,
    "kv_shared_unsplit": setup_pb2.KV_SHARED_UNSPLIT,
}


def decode_attention(case: Case) -> int:
    """LlmInference.decode_attention (the decode kernel family) of the row's serving stack:
    - extra_params `decode_attention=kv_shared|kv_per_query_head|kv_shared_unsplit` when
      the row says;
    - for TensorRT-LLM rows with `engine_version` (the release their source states):
      KV_SHARED where that release runs XQA for the model (`trtllm_xqa`), else
      KV_PER_QUERY_HEAD (its masked multi-head attention kernel: one thread block per
      query head, before 0.8 for every model);
    - KV_SHARED otherwise (the setup's default: today's group-aware kernels; also a
      TensorRT-LLM row whose release is not stated)."""
    given = case.extra.get("decode_attention", "")
    if given:
        if given not in DECODE_ATTENTION:
            known = "/".join(DECODE_ATTENTION)
            raise Unmodelable(f"decode_attention={given} is not one of {known}")
        return DECODE_ATTENTION[given]
    version = case.extra.get("engine_version", "")
    if case.extra.get("engine") == "TensorRT-LLM" and version:
        if not trtllm_xqa(case, _version(version)):
            return setup_pb2.KV_PER_QUERY_HEAD
    return setup_pb2.KV_SHARED


def _given(case: Case, key: str, valid: Callable[[float], bool], what: str) -> float | None:
    """The row's extra_params number `key`, None when absent; Unmodelable naming `what`
    is valid when it is not a number or out of range."""
    text = case.extra.get(key, "")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and valid(value)):
        raise Unmodelable(f"{key}={text} is not {what}")
    return value


def kv_reread_dram_share(case: Case, mode: int) -> float:
    """LlmInference.kv_reread_dram_share of the row: extra_params `kv_reread_dram_share` when
    given (a per-query-head row only: the share means nothing to a group-aware kernel), else
    the setup field's default, none: the group's thread blocks run side by side and the L2
    serves the repeats (the 0.7 once fitted here stood for the 8-bit cache's per-query-head
    conversions, now priced)."""
    given = _given(case, "kv_reread_dram_share", lambda v: 0 <= v <= 1, "a number in [0, 1]")
    if given is None:
        return 0.0
    if mode != setup_pb2.KV_PER_QUERY_HEAD:
        raise Unmodelable("kv_reread_dram_share needs decode_attention=kv_per_query_head")
    return given


def tensor_parallel_split(case: Case) -> int:
    """TensorParallelSplit of the row's measured run, from its fields:
    - extra_params `tp_split=model_dims|searched` when the row says;
    - MODEL_DIMS_SPLIT otherwise: every measured inference run in the schema comes from a
      stack with Megatron-style tensor parallelism (TensorRT-LLM, optimum-habana's DeepSpeed
      AutoTP, LLMCompass's TP blocks): heads / MLP width / vocabulary split, norms and
      residual adds whole on every chip, an all-reduce after each row-parallel linear. The
      row predicts that engine's measurement, so it gets that engine's split; `mapshard run`
      of a user's setup keeps the searched split (the default)."""
    given = case.extra.get("tp_split", "")
    if given:
        values = {"model_dims": setup_pb2.MODEL_DIMS_SPLIT, "searched": setup_pb2.SEARCHED_SPLIT}
        if given not in values:
            raise Unmodelable(f"tp_split={given} is not model_dims/searched")
        return values[given]
    return setup_pb2.MODEL_DIMS_SPLIT


# Host time per generate call of TensorRT-LLM's C++ GptSession as gptSessionBenchmark times
# it (context-step preparation, first-token sampling, output finalisation, the closing
# synchronize; cpp/tensorrt_llm/runtime/gptSession.cpp): the least mean |relative error| of
# the FIT first-token rows (P-TTF02-06, 09-11, 13, 15 and dev I10, 0.1 ms grid; 18.4% ->
# 7.8%). No CHECK row was used.
TRTLLM_SESSION_REQUEST_OVERHEAD_US = 3600.0


def request_overhead_us(case: Case) -> float:
    """The serving runtime's host time per generate call (LlmInference.request_overhead_us):
    extra_params `request_overhead_us` when the row says; TRTLLM_SESSION_REQUEST_OVERHEAD_US
    for TensorRT-LLM's gptSessionBenchmark; else 0 (not calibrated: the Python runtime of
    benchmarks/python and optimum-habana have no fitted value)."""
    given = _given(case, "request_overhead_us", lambda v: v >= 0, "a number >= 0")
    if given is not None:
        return given
    session = case.extra.get("harness") == "gptSessionBenchmark"
    if case.extra.get("engine") == "TensorRT-LLM" and session:
        return TRTLLM_SESSION_REQUEST_OVERHEAD_US
    return 0.0


LOSS_IMPL = {
    "fp32_passes": setup_pb2.LOSS_FP32_PASSES,
    "fused": setup_pb2.LOSS_FUSED,
    "torch_eager": setup_pb2.LOSS_TORCH_EAGER,
}


def training_kernels(case: Case) -> tuple[bool, int]:
    """(eager activation, LossImpl) of a training row's framework, from extra_params:
    `eager_activation=1` when the MLP activation runs as eager ops (NeMo 1.x's squared
    ReLU), `loss_impl=fused` for a fused cross-entropy (Megatron-Bridge's recipes:
    cross_entropy_loss_fusion with the "te" implementation), `loss_impl=torch_eager` for
    PyTorch's own cross_entropy on FP32 logits (plain PyTorch loops); Megatron's FP32
    passes and a fused activation otherwise. The row's notes cite the recipe."""
    loss = case.extra.get("loss_impl", "fp32_passes")
    if loss not in LOSS_IMPL:
        raise Unmodelable(f"loss_impl={loss} is not {' or '.join(LOSS_IMPL)}")
    return _flag(case, "eager_activation"), LOSS_IMPL[loss]


def eager_ops(case: Case) -> tuple[bool, bool]:
    """(eager activation, eager RoPE): `eager_activation=1`, `eager_rope=1` when the row's
    framework runs the MLP activation or the rotary embedding as separate eager ops (plain
    PyTorch; generator/ops_eager.py), in training and in inference rows alike."""
    return _flag(case, "eager_activation"), _flag(case, "eager_rope")


MOE_GEMM = {
    "": setup_pb2.MOE_GEMM_DEFAULT,
    "grouped": setup_pb2.MOE_GEMM_GROUPED,
    "per_expert": setup_pb2.MOE_GEMM_PER_EXPERT,
    "torch_grouped": setup_pb2.MOE_GEMM_TORCH_GROUPED,
}


def moe_gemm(case: Case) -> int:
    """MoeGemm of the row's expert GEMMs (`moe_gemm=grouped`: one kernel over every expert;
    `torch_grouped`: torch._grouped_mm; `per_expert`: a GEMM per expert); absent, the
    workload's default."""
    return _named(case, "moe_gemm", MOE_GEMM)


MOE_PERMUTE = {
    "": setup_pb2.MOE_PERMUTE_DEFAULT,
    "fused": setup_pb2.MOE_PERMUTE_FUSED,
    "scatter_add": setup_pb2.MOE_PERMUTE_SCATTER_ADD,
}


MOE_DISPATCHER = {
    "": setup_pb2.MOE_DISPATCHER_ALLTOALL,
    "alltoall": setup_pb2.MOE_DISPATCHER_ALLTOALL,
    "deepep": setup_pb2.MOE_DISPATCHER_DEEPEP,
}


def moe_dispatcher(case: Case) -> int:
    """LlmTraining.moe_dispatcher of the row (`moe_dispatcher=alltoall`: Megatron-core's NCCL
    all-to-all dispatcher, the default; `deepep`: DeepEP's kernels)."""
    return _named(case, "moe_dispatcher", MOE_DISPATCHER)


def moe_permute(case: Case) -> int:
    """MoePermute of the row's MoE layers (`moe_permute=fused`: Transformer Engine's fused
    permutation or an engine's kernels; `scatter_add`: PyTorch's ops); absent, the
    workload's default."""
    return _named(case, "moe_permute", MOE_PERMUTE)


def _named(case: Case, key: str, values: dict[str, int]) -> int:
    """The setup enum value the row's `key` names (absent: values[""])."""
    given = case.extra.get(key, "")
    if given not in values:
        raise Unmodelable(f"{key}={given} is not {' or '.join(v for v in values if v)}")
    return values[given]


def master_grad_cast(case: Case) -> bool:
    """`master_grad_cast=1`: the run casts its 16-bit gradients to FP32 by a kernel of its
    own before the optimizer (a plain PyTorch loop over FP32 master weights)."""
    return _flag(case, "master_grad_cast")


# Execution.host_op_us of PyTorch 2 eager on the host of the project's H200 measurements
# (benchmarks/gpu_runs.py): least mean |error| over the FIT rows that time a per-expert
# Python loop, M-H200-R004 (Mixtral, 8 experts: GPU-bound, hardly moved) and M-H200-R008
# (Qwen3-30B-A3B, 128 experts: 12 host ops per expert and layer), by
# `python -m mapshard.fidelity.fit_host_op` (30.16, 2026-11-30, since the loop's backward
# queues ahead of the GPU: solver.search.assemble.host_exposed_s; 16.83 while every loop
# kernel waited on the host by itself, which priced R008's backward as host-bound though its
# GPU work hides most of it). A counted op is one of the loop's kernels with the Python and
# view ops around it (`.t()`, `.chunk`, the list append, autograd's node), hence above the
# 5-25 us per launch that accounts of PyTorch's eager dispatch give.
TORCH_EAGER_HOST_OP_US = 30.2


def host_op_us(case: Case) -> float:
    """`library=torch_eager`: the run is PyTorch eager driven from Python, whose loops
    right after a sync wait on the host (Execution.host_op_us); any other library: 0."""
    return TORCH_EAGER_HOST_OP_US if case.extra.get("library", "") == "torch_eager" else 0.0


def edges_in_pipeline_split(case: Case) -> bool:
    """Whether the run's pipeline split counts the embedding and the loss as a layer each
    (extra_params `edges_in_pipeline_split=1`: Megatron's account_for_embedding_in_pipeline_
    split and account_for_loss_in_pipeline_split, set by the recipe cited in the notes)."""
    return _flag(case, "edges_in_pipeline_split")


def fp8_param_gather(case: Case) -> bool:
    """Whether the run all-gathers its FP8 GEMM weights in FP8 (extra_params
    `fp8_param_gather=1`: Megatron's --fp8-param-gather, set by the recipe in the notes)."""
    return _flag(case, "fp8_param_gather")


GRAD_REDUCE_DTYPES = ("fp32", "bf16", "fp16")


def grad_reduce_fp32(case: Case) -> bool:
    """Whether the run reduces its DP gradients in FP32 (extra_params `grad_reduce_dtype`:
    fp32, or bf16/fp16 for the 16-bit reduction; absent: 16-bit), from the recipe in the
    notes (Megatron-core grad_reduce_in_fp32, apex grad_sync_dtype, FSDP reduce_dtype)."""
    given = case.extra.get("grad_reduce_dtype", "")
    if given and given not in GRAD_REDUCE_DTYPES:
        raise Unmodelable(f"grad_reduce_dtype={given} is not {', '.join(GRAD_REDUCE_DTYPES)}")
    return given == "fp32"


def _flag(case: Case, key: str) -> bool:
    """The row's extra_params 0/1 switch `key` (absent: 0)."""
    return _given(case, key, lambda v: v in (0, 1), "0 or 1") == 1
