"""Under FP8 (and INT8/INT4) math the LM head stays 16-bit (Megatron-LM/NeMo run the output
layer outside Transformer Engine's FP8 modules; TensorRT-LLM's FP8 quantisation excludes
lm_head), at the 16-bit peak and plateau; everything else keeps the workload's precision."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from mapshard import pipeline
from schema import setup_pb2
from solver.cost.efficiency import for_precision

INFER = """workload {{ llm_inference {{ model {{ hf_model: "Llama-3.1-8B" }} phase: PREFILL
  batch: 2 input_len: 256 }} precision {{ math: {math} weight: {math} }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 1 kernel_source: "none" }}"""


def _setup(text: str) -> setup_pb2.Setup:
    return text_format.Parse(text, setup_pb2.Setup())


def test_the_fp8_head_kernels_carry_the_16_bit_precision():
    s = _setup(INFER.format(math="FP8"))
    head = build_workload(s, Path("setup.txt"), 1).phases[-1].graph
    assert head.kernel("lm_head").math_precision == "bf16"
    assert {k.math_precision for k in head.kernels if k.name != "lm_head"} == {""}
    s16 = _setup(INFER.format(math="BF16"))
    assert (
        build_workload(s16, Path("setup.txt"), 1).phases[-1].graph.kernel("lm_head").math_precision
        == ""
    )


def test_a_training_head_keeps_its_backward_at_16_bit_too():
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.model.hf_model = "Llama-3.1-8B"
    t.global_batch, t.micro_batch, t.seq_len = 2, 1, 128
    s.workload.precision.math = setup_pb2.FP8
    head = next(p for p in build_workload(s, Path("setup.txt"), 1).phases if p.role == "head")
    sixteen = {k.name for k in head.graph.kernels if k.math_precision == "bf16"}
    assert sixteen == {"lm_head", "lm_head_bwd", "lm_head_weight_update"}


def test_for_precision_keeps_the_chips_own_plateau():
    """H100: FP8 plateau 0.694, 16-bit 0.784; the FP8 chip still knows the 16-bit one."""
    h100 = pipeline.resolve(pipeline.load_message(_setup(INFER.format(math="FP8")), Path(".")))
    fp8 = for_precision(h100.chip, "fp8")
    assert fp8.efficiency.gemm_util == 0.694 and fp8.efficiency.base_gemm_util == 0.784
    assert for_precision(fp8, "bf16").efficiency.gemm_util == 0.784
    assert for_precision(h100.chip, "bf16") is h100.chip


def _kernels(math: str) -> dict:
    loaded = pipeline.load_message(_setup(INFER.format(math=math)), Path("setup.txt"))
    plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
    return {(ph.name, k.name): k for ph in plan.phases for k in ph.kernels}


def test_the_fp8_head_computes_as_fast_as_a_bf16_one_and_the_rest_as_fp8():
    """The FP8 run's LM head has the BF16 run's compute time (same peak 989.4 TF, plateau
    0.784, shape); its q_proj takes (989.4 x 0.784) / (1978.9 x 0.694) = 0.565 of the BF16
    run's matrix time (the 4.5 us overhead aside; same tiles, so the same occupancy)."""
    fp8, bf16 = _kernels("FP8"), _kernels("BF16")
    head = ("prefill_head", "lm_head")
    assert fp8[head].compute_s == pytest.approx(bf16[head].compute_s, rel=1e-9)
    q = ("prefill", "q_proj")
    ovh = 4.5e-6
    ratio = (fp8[q].compute_s - ovh) / (bf16[q].compute_s - ovh)
    assert ratio == pytest.approx(989.4 * 0.784 / (1978.9 * 0.694), rel=1e-6)
