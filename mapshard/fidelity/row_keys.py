"""Every `extra_params` key a validation row may carry, and what it does.

A key is one of four kinds (VALIDATION_SCHEMA.md lists them with the same words):
- setup: it sets a field of the row's setup (`SETUP_KEYS` names the field), so the scenario
  `validate` predicts is the one `mapshard run` of that setup file runs;
- convention: it turns the predicted time into the row's metric (FLOP count, peak,
  tokens counted, the group a row is reported in); the scenario does not read it;
- setting: a setting of the measured run that the setup has no field for. The row is
  predicted only when the value is the one the model runs (`SETTINGS` lists it, or a
  rule checks it against the columns that express it); any other value makes the row
  "not modelled", with the key named;
- record: a fact about the measurement (secondary numbers, provenance, versions); never
  read by the prediction.
A key of no kind is a typo or a setting nobody has decided on: `read_cases` stops with one
line naming the valid keys, instead of predicting a scenario the row did not describe.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

# key -> the setup field it sets (or the rule that sets it)
SETUP_KEYS: Mapping[str, str] = {
    "hf_config": "workload.*.model.hf_model (the shipped config when its dims match; a row "
    "with fewer layers is inline and keeps its qk_norm)",
    "local_config": "workload.*.model.hf_model (a shipped config without a hub repo)",
    "weights_dtype": "workload.precision.weight",
    "kv_cache_dtype": "workload.precision.kv_cache",
    "gemm_plugin": "workload.precision.math and weight (16 bits unless fp8; TensorRT-LLM)",
    "engine": "with harness, engine_version, gemm_plugin: the fields they set",
    "harness": "llm_inference.request_overhead_us (TensorRT-LLM gptSessionBenchmark)",
    "engine_version": "llm_inference.decode_attention (masked MHA where the release's XQA "
    "does not cover the model)",
    "decode_attention": "llm_inference.decode_attention",
    "kv_reread_dram_share": "llm_inference.kv_reread_dram_share",
    "tp_split": "llm_inference.tensor_parallel_split",
    "max_num_tokens": "llm_inference.prefill_tokens_per_pass, stream.max_num_tokens",
    "request_overhead_us": "llm_inference.request_overhead_us",
    "requests": "llm_inference.stream.num_requests",
    "max_batch": "llm_inference.stream.max_batch",
    "kv_memory_fraction": "llm_inference.stream.kv_memory_fraction",
    "chunked_prefill": "llm_inference.stream.chunked_prefill",
    "attention_impl": "llm_*.attention",
    "dropout": "llm_training.dropout",
    "op_qk_s": "llm_*.attention (op-by-op timed attention core: UNFUSED_ATTENTION)",
    "op_softmax_s": "llm_*.attention (as op_qk_s)",
    "op_av_s": "llm_*.attention (as op_qk_s)",
    "calculon_model": "llm_training.attention and dropout (Megatron-era unfused attention)",
    "calculon_recompute": "llm_training.attention (as calculon_model); must match recompute",
    "calculon_tp_comm": "llm_training.attention (as calculon_model); must match sequence_parallel",
    "zero_stage": "llm_training.zero_stage",
    "sharding": "llm_training.zero_stage (zero1, zero2, zero3)",
    "optimizer_sharding": "llm_training.zero_stage (1: ZeRO-1)",
    "distributed_optimizer": "llm_training.zero_stage (1: ZeRO-1)",
    "optimizer": "llm_training.zero_stage (training_row.OPTIMIZERS)",
    "ddp_impl": "llm_training.dp_overlap (torch: overlapped; local: not)",
    "overlap_grad_reduce": "llm_training.dp_overlap",
    "overlap_param_gather": "llm_training.dp_overlap",
    "tp_comm_overlap": "execution.tp_comm_overlap",
    "fp8_param_gather": "llm_training.fp8_param_gather",
    "expert_tensor_parallel": "llm_training.expert_tensor_parallel (absent: searched, 1 or TP)",
    "grad_reduce_dtype": "llm_training.grad_reduce_fp32",
    "eager_activation": "llm_*.eager_activation",
    "eager_rope": "llm_*.eager_rope",
    "master_grad_cast": "llm_training.master_grad_cast",
    "moe_gemm": "llm_*.moe_gemm (grouped, torch_grouped, per_expert)",
    "moe_permute": "llm_*.moe_permute (fused, scatter_add)",
    "moe_dispatcher": "llm_training.moe_dispatcher (alltoall, deepep)",
    "shared_experts": "llm_*.model.inline.num_shared_experts (equal to a shipped config's)",
    "loss_impl": "llm_training.loss",
    "edges_in_pipeline_split": "llm_training.edges_in_pipeline_split",
    "pipeline_schedule": "llm_training.virtual_pipeline (1F1B: 1; must match pp and the "
    "virtual_pipeline column)",
    "kernel_source": "system.kernel_source",
    "library": "execution.host_op_us (torch_eager: engines.TORCH_EAGER_HOST_OP_US; a GEMM "
    "row's library: recorded only)",
    "attention_kernel": "execution.attention_kernel (fa2: PyTorch's flash SDPA backend)",
    "timing": "execution.cuda_graph (cuda_graph_replay); cupti_median_kernel_ns and "
    "cuda_graph_replay GEMM rows: the report group gemm_kernel_only",
    "scale_out_bw_Bps": "system.topology[].link_bw_GBps of the levels across nodes",
    "hbm_bw_Bps": "system.memory.dram_bw",
    "hbm_capacity_bytes": "system.memory.dram_cap",
    "hpl_n": "workload.hpl.N",
    "hpl_nb": "workload.hpl.B",
    "hpl_p": "workload.hpl.X",
    "hpl_q": "workload.hpl.Y",
    "hpl_depth": "workload.hpl.depth (HPL.dat's look-ahead DEPTH)",
}
CONVENTION_KEYS: Mapping[str, str] = {
    "num_params_in_mfu": "llmfoundry_mfu FLOP",
    "peak_flops_in_mfu": "the peak an mfu/hfu metric divides by",
    "peak_flops_per_chip": "the peak an mfu/hfu metric divides by",
    "num_params": "palm_6N_plus_12LHQT FLOP",
    "causal": "flash_attn_benchmark FLOP",
    "attn_pass": "flash_attn_benchmark FLOP",
    "pass": "flash_attn_benchmark FLOP and the kernel: attn_pass as gpu_measure.py spells it; "
    "a moe_layer row's pass (fwd, bwd)",
    "tokens_counted": "tokens of a tokens_per_s metric (output only)",
    "bytes_counted": "bytes of a bandwidth metric (STREAM copy: read+write)",
}
# setting -> the values the model runs; any other value: the row is not modelled
SETTINGS: Mapping[str, tuple[str, ...]] = {
    # tensor-wise scaled FP8 GEMMs (Transformer Engine delayed or current scaling): the
    # model's FP8 path; block-scaled MXFP8 and torchao's row-wise scaling are not modelled
    "fp8_recipe": ("delayed_hybrid", "per_tensor_current"),
    "compile": ("0",),  # torch.compile fusions are not modelled
    "async_tp": ("0",),  # PyTorch async TP (collective matmul) is not modelled
    "loss_parallel": ("1",),  # vocabulary-parallel cross-entropy: the model's TP loss
    "fsdp_reshard_after_forward": ("1",),  # FSDP FULL_SHARD re-gathers in the backward
    "cp_rotate_method": ("p2p",),  # the model's context parallelism passes K/V around a ring
    "routed_expert_fsdp": (),
    "selective_ac_layer_period": (),
    "power_limited": ("0",),
    "power_cap_w": (),  # a power cap below the library chip's TDP is not modelled
    "chip_variant": (),  # a part other than the library chip
    "pods": (),
    "fsdp_ways_per_pod": (),
    "stream_kernel": ("copy",),  # memory_copy rows predict the copy bandwidth
    "fused_activation": ("0",),  # Calculon: the activation is a kernel of its own
    "attention": ("multihead",),  # Calculon: multi-head attention (kv_heads = heads)
}
# settings checked against the columns that express them (row_settings below)
RULE_KEYS = (
    "batching",
    "grad_accum",
    "pp_microbatches",
    "fsdp_shard_ranks",
    "ac_mode",
    "parallel_layers",
    "multi_query",
)
RECORD_KEYS = (
    "device",  # the GPU name as the driver reports it (benchmarks/gpu_measure.py rows)
    "nccl_algo",
    "nccl_version",
    "in_place",
    "runtime_s",
    "benchmark_dim",
    "dtype",
    "stream_dtype",
    "array_elements",
    "allreduce_message_bytes",
    "scenario",
    "samples_per_s",
    "target_qps",
    "seq_par_ag_redo",
    "measured_at_step",
    "measure_window_steps",
    "runs",
    "op",
    "layout",
    "benchmark",
    "form_factor_verified",
    "num_gpus_inferred_from_harness",
    "xla_device_key",
    "xla_dtype",
    "l2_bytes",
)
RECORD_PREFIXES = ("derived_", "also_", "op_", "ttft_", "tpot_")


def key_kind(key: str) -> str:
    """ "setup", "convention", "setting", "record", or "" for an unknown key."""
    if key in SETUP_KEYS:
        return "setup"
    if key in CONVENTION_KEYS:
        return "convention"
    if key in SETTINGS or key in RULE_KEYS:
        return "setting"
    if key in RECORD_KEYS or key.startswith(RECORD_PREFIXES):
        return "record"
    return ""


def valid_keys() -> list[str]:
    """Every exact key, then the record prefixes as `prefix*`."""
    exact = [*SETUP_KEYS, *CONVENTION_KEYS, *SETTINGS, *RULE_KEYS, *RECORD_KEYS]
    return sorted(exact) + [f"{p}*" for p in RECORD_PREFIXES]


def unknown_key_problem(key: str) -> str:
    """The one-line complaint about `key`: a close spelling when there is one, the valid keys."""
    exact = [k for k in valid_keys() if not k.endswith("*")]
    near = difflib.get_close_matches(key, exact, n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    return (
        f"extra_params key {key!r} is not known{hint}; valid keys: {', '.join(valid_keys())} "
        "(tests/data/validation/VALIDATION_SCHEMA.md)"
    )
