"""Serving-engine execution of inference, by hand: Megatron-style tensor parallelism
(MODEL_DIMS_SPLIT) and a static batch's prefill in passes under a token budget
(prefill_tokens_per_pass), and how the validation builder gives a measured row both."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import Workload
from generator.llm_inference import prefill_passes
from mapshard import pipeline
from mapshard.fidelity.cases import Case, parse_extra
from mapshard.fidelity.engines import TRTLLM_SESSION_REQUEST_OVERHEAD_US as FITTED
from mapshard.fidelity.engines import (
    Unmodelable,
    kv_reread_dram_share,
    request_overhead_us,
    tensor_parallel_split,
)
from mapshard.fidelity.predict import predict
from mapshard.fidelity.scenarios import build_setup
from schema import setup_pb2
from solver.cost.menus import sharding_choices
from solver.search.infeasible import Reason, prefill_pass_fix


def _prefill(batch: int, input_len: int, split: int = setup_pb2.SEARCHED_SPLIT) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = "Llama-3.1-8B"
    i.phase, i.batch, i.input_len = setup_pb2.PREFILL, batch, input_len
    i.tensor_parallel_split = split
    return s


def _choices(split: int, tp: int = 8) -> dict[str, list[str]]:
    w = build_workload(_prefill(2, 256, split), Path("setup.txt"), tp)
    return {k.name: sharding_choices(k, tp) for p in w.phases for k in p.graph.kernels}


def test_engine_split_is_megatron_tensor_parallelism():
    """Llama-3.1-8B at TP 8: 8 KV heads of 4 query heads each (group 4 < 8 cannot split),
    MLP width 14336. Megatron: QKV column-parallel over the 8 KV heads, attention per head,
    the output projection row-parallel over the same heads (an all-reduce, or its
    reduce-scatter half), gate/up column-parallel and down row-parallel over ffn, norms and
    residual adds whole on every chip, the LM head over the vocabulary. No linear layer
    keeps its weights whole; no kernel splits the tokens."""
    c = _choices(setup_pb2.MODEL_DIMS_SPLIT)
    for name in ("attn_norm", "attn_residual", "mlp_norm", "mlp_residual", "final_norm"):
        assert c[name] == ["none"], name
    assert c["q_proj"] == c["kv_proj"] == c["attention"] == ["kv_heads"]
    assert c["o_proj"] == ["kv_heads", "kv_heads+rs"]
    assert c["mlp_gate_up"] == ["ffn"]
    assert c["mlp_down"] == ["ffn", "ffn+rs"]
    assert c["lm_head"] == ["vocab"]
    assert "none" in c["embedding"]  # TensorRT-LLM keeps the table whole by default
    assert not any(ch.startswith("tokens") for chs in c.values() for ch in chs)


def test_the_default_split_is_searched():
    """Without the engine split the search may split the tokens of a projection and keep
    its weights whole (sequence-parallel style), as before."""
    c = _choices(setup_pb2.SEARCHED_SPLIT)
    assert {"none", "tokens", "kv_heads"} <= set(c["q_proj"])
    assert "tokens" in c["attn_norm"]


@pytest.mark.parametrize(
    ("batch", "input_len", "budget", "expected"),
    [
        (364, 2048, 0, (364, 1)),  # no budget: one pass
        (364, 2048, 364 * 2048, (364, 1)),  # the whole batch fits the budget
        (364, 2048, 8192, (4, 91)),  # 8192 // 2048 = 4 sequences, 364 / 4 = 91 passes
        (364, 2048, 1000, (1, 364)),  # a budget below one prompt: one sequence per pass
        (10, 100, 400, (4, 3)),  # 4 a pass at most -> 3 passes, balanced: ceil(10/3) = 4
    ],
)
def test_prefill_passes(batch, input_len, budget, expected):
    assert prefill_passes(batch, input_len, budget) == expected


def _solve(batch: int, budget: int):
    s = _prefill(batch, 256)
    s.workload.llm_inference.prefill_tokens_per_pass = budget
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    loaded = pipeline.load_message(s, Path("x/setup.txt"))
    system = pipeline.resolve(loaded)
    return pipeline.plan(pipeline.assemble(loaded, system, pipeline.generate(loaded, system)))


def test_a_prefill_in_passes_costs_its_passes_and_holds_one():
    """Batch 4 x 256 tokens under a 512-token budget = 2 passes of 2 sequences: the time to
    the first token is 2 x that of one 2-sequence prefill (each pass re-reads the weights),
    the live activations those of one pass, the KV cache that of all 4 sequences
    (2 x 32 layers x 8 KV heads x 128 x 2 bytes = 128 KiB a token)."""
    two_passes, one_pass = _solve(4, 512), _solve(2, 0)
    assert two_passes.ttft_s == pytest.approx(2 * one_pass.ttft_s, rel=1e-9)
    assert two_passes.memory.activations == pytest.approx(one_pass.memory.activations)
    assert two_passes.memory.kv_cache == 4 * 256 * 2 * 32 * 8 * 128 * 2
    assert one_pass.memory.kv_cache == 2 * 256 * 2 * 32 * 8 * 128 * 2


def _case(**extra: str) -> Case:
    text = ";".join(f"{k}={v}" for k, v in extra.items())
    return Case({"id": "X", "kind": "inference_prefill", "extra_params": text}, parse_extra(text))


def test_a_measured_row_gets_its_engines_split():
    assert tensor_parallel_split(_case(engine="TensorRT-LLM")) == setup_pb2.MODEL_DIMS_SPLIT
    assert tensor_parallel_split(_case()) == setup_pb2.MODEL_DIMS_SPLIT
    assert tensor_parallel_split(_case(tp_split="searched")) == setup_pb2.SEARCHED_SPLIT
    with pytest.raises(Unmodelable, match="tp_split=rows"):
        tensor_parallel_split(_case(tp_split="rows"))


def test_the_runtimes_request_overhead_is_paid_once_per_generate_call():
    """request_overhead_us = 3600: the time to first token of the same prefill is exactly
    3.6 ms longer and the plan names it in its time breakdown; a decode step is a step of
    a generate call, not a call, and does not pay it."""
    plain = _solve(2, 0)
    s = _prefill(2, 256)
    s.workload.llm_inference.request_overhead_us = 3600
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    loaded = pipeline.load_message(s, Path("x/setup.txt"))
    system = pipeline.resolve(loaded)
    paid = pipeline.plan(pipeline.assemble(loaded, system, pipeline.generate(loaded, system)))
    assert paid.ttft_s == pytest.approx(plain.ttft_s + 3.6e-3, rel=1e-12)
    assert paid.time_breakdown["request_overhead"] == pytest.approx(3.6e-3)
    s.workload.llm_inference.phase, s.workload.llm_inference.context_len = setup_pb2.DECODE, 64
    assert build_workload(s, Path("setup.txt"), 1).request_overhead_s == 0.0


def test_tensorrt_llm_sessions_get_the_fitted_overhead():
    session = {"engine": "TensorRT-LLM", "harness": "gptSessionBenchmark"}
    assert request_overhead_us(_case(**session)) == FITTED == 3600.0
    python_runtime = {"engine": "TensorRT-LLM", "harness": "benchmarks/python/benchmark.py"}
    assert request_overhead_us(_case(**python_runtime)) == 0.0
    assert request_overhead_us(_case(engine="optimum-habana")) == 0.0
    assert request_overhead_us(_case(request_overhead_us="250")) == 250.0
    with pytest.raises(Unmodelable, match="request_overhead_us=-1"):
        request_overhead_us(_case(request_overhead_us="-1"))


def test_tensorrt_llm_fp8_without_the_fp8_gemm_plugin_multiplies_in_16_bit():
    """TensorRT-LLM's FP8Linear uses the FP8 GEMM only with gemm_plugin fp8; built with
    `--gemm_plugin auto` (the model dtype) it dequantizes to 16 bits: math and weights
    16-bit, the KV cache still FP8. Rows that do not name the plugin keep FP8 GEMMs."""

    def precision(**extra: str) -> tuple[str, str, str]:
        base = {"engine": "TensorRT-LLM", "weights_dtype": "fp8", "kv_cache_dtype": "fp8"}
        text = ";".join(f"{k}={v}" for k, v in {**base, **extra}.items())
        cells = {
            "id": "X", "kind": "inference_prefill", "usable": "1", "chip": "H100-SXM5-80GB",
            "num_chips": "1", "precision": "fp8", "batch": "1", "input_len": "128",
            "output_len": "1", "extra_params": text,
            "model": "m", "hidden": "4096", "layers": "2", "heads": "32", "ffn_hidden": "11008",
            "ffn_kind": "swiglu", "vocab": "32000",
        }  # fmt: skip
        p = build_setup(Case(cells, parse_extra(text)))[0].workload.precision
        return tuple(setup_pb2.DType.Name(x) for x in (p.math, p.weight, p.kv_cache))

    assert precision() == ("FP8", "FP8", "FP8")
    assert precision(gemm_plugin="fp8") == ("FP8", "FP8", "FP8")
    assert precision(gemm_plugin="auto") == ("BF16", "BF16", "FP8")


def test_a_reread_share_is_read_only_for_a_per_query_head_row():
    """No share given: none of the repeats reach DRAM (the physical default, nothing
    fitted); given, it must be in [0, 1] and the row's kernel per query head."""
    trt = _case(engine="TensorRT-LLM", engine_version="0.6.1")
    assert kv_reread_dram_share(trt, setup_pb2.KV_PER_QUERY_HEAD) == 0.0
    assert kv_reread_dram_share(trt, setup_pb2.KV_SHARED) == 0.0
    given = _case(kv_reread_dram_share="0.5")
    assert kv_reread_dram_share(given, setup_pb2.KV_PER_QUERY_HEAD) == 0.5
    with pytest.raises(Unmodelable, match="kv_reread_dram_share=1.5"):
        kv_reread_dram_share(_case(kv_reread_dram_share="1.5"), setup_pb2.KV_PER_QUERY_HEAD)
    with pytest.raises(Unmodelable, match="needs decode_attention=kv_per_query_head"):
        kv_reread_dram_share(given, setup_pb2.KV_SHARED)


def test_an_infeasible_prefill_is_told_the_pass_budget_that_fits():
    """100 GB needed of which 60 activations, 70 GB of DRAM: the other 40 stay, so p passes
    need 40 + 60 / p <= 70 -> p = 2, 10 sequences / 2 = 5 a pass x 100 tokens = 500; a
    decode step or a machine too small for the weights alone gets no such fix."""
    gb = 1e9
    best = Reason("DRAM capacity", "", 100 / 70, "", 100 * gb, 60 * gb)
    prefill = Workload("inference", (), phase="prefill", batch=10, input_len=100)
    assert prefill_pass_fix(prefill, best, 70 * gb).endswith("prefill_tokens_per_pass ≤ 500")
    decode = Workload("inference", (), phase="decode", batch=10, input_len=100)
    assert prefill_pass_fix(decode, best, 70 * gb) == ""
    assert prefill_pass_fix(prefill, best, 39 * gb) == ""


def _row(**cells: str) -> Case:
    base = {
        "id": "X", "kind": "inference_static_batch", "usable": "1", "chip": "H100-SXM5-80GB",
        "num_chips": "1", "precision": "bf16", "model": "Llama-3.1-8B", "hidden": "4096",
        "layers": "32", "heads": "32", "kv_heads": "8", "head_dim": "128",
        "ffn_hidden": "14336", "ffn_kind": "swiglu", "vocab": "128256", "tp": "1",
        "batch": "160", "input_len": "2048", "output_len": "2", "metric": "tokens_per_s",
        "value": "1000",
    }  # fmt: skip
    base.update(cells)
    text = "hf_config=meta-llama/Llama-3.1-8B;" + base.pop("extra_params", "")
    return Case({**base, "extra_params": text}, parse_extra(text))


def test_a_measured_batch_that_cannot_prefill_at_once_is_prefilled_in_passes():
    """Llama-3.1-8B, 160 x 2048 prompt tokens on one 80 GiB H100 in 16 bits: weights 16 GB
    + KV cache 160 x 2050 x 128 KiB = 43 GB leave ~27 GB of 85.9, the one-pass MLP activations
    (327,680 tokens x 14,336 x 3 tensors x 2 bytes = 28 GB) do not fit; 2 passes of 80
    sequences (14 GB) do, and the row's prediction is that plan: the same time as the row
    with max_num_tokens = 80 x 2048 given."""
    where = Path("x/cases.csv")
    free = predict(_row(), where)
    assert free.detail.endswith("prefill in 2 passes (whole batch: OOM)")
    given = predict(_row(extra_params=f"max_num_tokens={80 * 2048}"), where)
    assert free.value == pytest.approx(given.value, rel=1e-12)
