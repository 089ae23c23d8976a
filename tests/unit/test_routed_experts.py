"""An MoE layer's experts that no token is routed to run nothing and read no weights
(Kernel.expert_share): a decode step of one sequence reads k experts' weights, not all of
them, while the chip still stores every expert. Numbers worked out by hand."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.moe_routing import routed_expert_share
from mapshard import pipeline
from schema import setup_pb2
from solver.cost.menus import busiest_experts

BF16 = 2


def test_the_share_is_one_less_the_chance_no_token_picks_an_expert():
    assert routed_expert_share(1, 8, 128) == pytest.approx(8 / 128)  # one token: k experts
    assert routed_expert_share(2, 8, 128) == pytest.approx(1 - (120 / 128) ** 2)  # 31/256
    assert routed_expert_share(4, 2, 8) == pytest.approx(1 - 0.75**4)  # 175/256
    assert routed_expert_share(10_000, 2, 8) == pytest.approx(1.0)


def _plan(text: str):
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))


def _kernels(plan, phase: str) -> dict:
    return {k.name: k for p in plan.phases if p.name == phase for k in p.kernels}


def test_one_sequence_reads_eight_of_qwen3_30b_a3bs_128_experts_and_stores_all():
    plan = _plan(
        'workload { llm_inference { model { hf_model: "Qwen3-30B-A3B" } phase: DECODE '
        'batch: 1 context_len: 1024 } } system { chip: "H200-SXM-141GB" num_chip: 1 }'
    )
    k = _kernels(plan, "decode")
    hidden, ffn = 2048, 768
    # gate and up (2 x ffn x hidden) and down (ffn x hidden) of 8 experts, plus the token's
    # own rows (one routed slot per expert reached: hidden in, 2 ffn out; ffn in, hidden out)
    gate_up = 8 * 2 * ffn * hidden * BF16 + 8 * (hidden + 2 * ffn) * BF16
    down = 8 * ffn * hidden * BF16 + 8 * (ffn + hidden) * BF16
    assert k["expert_gate_up"].dram_bytes == pytest.approx(gate_up, rel=1e-9)
    assert k["expert_down"].dram_bytes == pytest.approx(down, rel=1e-9)
    # the chip stores every expert: 48 layers x 128 experts x 3 x 2048 x 768 parameters
    experts_bytes = 48 * 128 * 3 * hidden * ffn * BF16
    assert plan.memory.weights >= experts_bytes


def test_a_random_family_of_batches_reads_the_experts_their_tokens_reach():
    """A small inline MoE (hidden 256, FFN 512, top-2 of 16 experts) decoding 1-40
    sequences: expert_down reads ceil(16 x share) experts' weights and the routed rows."""
    rng = random.Random(35)
    hidden, ffn, experts, k = 256, 512, 16, 2
    model = (
        f'inline {{ name: "moe" architecture: "mixtral" hidden_size: {hidden} num_layers: 2 '
        f"num_heads: 4 num_kv_heads: 4 head_dim: 64 intermediate_size: {ffn} "
        f"vocab_size: 1000 ffn: SWIGLU norm: RMSNORM num_experts: {experts} "
        f"experts_per_token: {k} moe_intermediate_size: {ffn} }}"
    )
    for batch in sorted(rng.sample(range(1, 41), 8)):
        plan = _plan(
            f"workload {{ llm_inference {{ model {{ {model} }} phase: DECODE batch: {batch} "
            'context_len: 64 } } system { chip: "H200-SXM-141GB" num_chip: 1 }'
        )
        down = _kernels(plan, "decode")["expert_down"]
        reached = math.ceil(experts * (1 - (1 - k / experts) ** batch) - 1e-9)
        if reached * 1.0 > experts - 1:  # every expert: the kernel keeps no share
            reached = experts
        per_expert_tokens = -(-batch * k // experts)
        rows = reached * per_expert_tokens * (ffn + hidden) * BF16
        assert down.dram_bytes == pytest.approx(reached * ffn * hidden * BF16 + rows), batch


def _qwen3_decode(batch: int, moe_gemm: str) -> dict:
    plan = _plan(
        'workload { llm_inference { model { hf_model: "Qwen3-30B-A3B" } phase: DECODE '
        f"batch: {batch} context_len: 1024 moe_gemm: {moe_gemm} }} }} "
        'system { chip: "H200-SXM-141GB" num_chip: 1 kernel_source: "none" }'
    )
    return _kernels(plan, "decode")


def test_an_engines_grouped_kernel_streams_the_experts_a_gemm_per_expert_waits_on_waves():
    """64 sequences reach 126 of 128 experts (ceil(128 x (1 - (120/128)^64))) with 4 routed
    rows each: one grouped kernel schedules their 126 x 12 tiles of gate/up together and
    streams the weights (memory-bound: 126 x 2 x 768 x 2048 x 2 bytes at 4.8 TB/s x
    0.8595), where a GEMM per expert runs 126 kernels' worth of waves of one tile row."""
    reached = math.ceil(128 * (1 - (120 / 128) ** 64))
    assert reached == 126
    weights = reached * 2 * 768 * 2048 * BF16
    grouped = _qwen3_decode(64, "MOE_GEMM_GROUPED")["expert_gate_up"]
    assert grouped.bound == "memory"
    assert grouped.memory_s == pytest.approx(
        (weights + reached * 4 * (2048 + 2 * 768) * BF16) / (4.8e12 * 0.8595), rel=1e-9
    )
    per_expert = _qwen3_decode(64, "MOE_GEMM_PER_EXPERT")["expert_gate_up"]
    assert per_expert.compute_s > per_expert.memory_s == pytest.approx(grouped.memory_s)
    assert "per-expert shape x 126" in per_expert.time_source
    default = _qwen3_decode(64, "MOE_GEMM_DEFAULT")["expert_gate_up"]
    assert (default.compute_s, default.memory_s) == (grouped.compute_s, grouped.memory_s)


def test_training_runs_a_gemm_per_expert_unless_told():
    text = (
        'workload { llm_training { model { hf_model: "Qwen3-30B-A3B" } global_batch: 1 '
        'micro_batch: 1 seq_len: 256 %s } } system { chip: "H100-SXM5-80GB" num_chip: 8 }'
    )
    for field, fused in (("", False), ("moe_gemm: MOE_GEMM_GROUPED", True)):
        setup = text_format.Parse(text % field, setup_pb2.Setup())
        loaded = pipeline.load_message(setup, Path("setup.txt"))
        workload = pipeline.generate(loaded, pipeline.resolve(loaded))
        gemms = [
            k
            for p in workload.phases
            for k in p.graph.kernels
            if k.name.startswith(("expert_gate_up", "expert_down"))
        ]
        assert gemms and {k.fused_experts for k in gemms} == {fused}
        assert {k.expert_share for k in gemms} == {1.0}  # 256 tokens reach every expert


def test_the_busiest_chip_is_the_expected_maximum_by_enumeration():
    """Experts split over chips, each reached with probability `share`: the step waits on
    the chip with the most. Every reached/unreached pattern of the experts enumerated: the
    expected maximum over chips of the reached count, rounded up."""
    for experts, share, chips in ((2, 0.5, 2), (4, 0.25, 2), (3, 0.2, 3), (2, 0.1, 4)):
        expected = 0.0
        for pattern in itertools.product((0, 1), repeat=experts * chips):
            p = math.prod(share if bit else 1 - share for bit in pattern)
            counts = [sum(pattern[c * experts : (c + 1) * experts]) for c in range(chips)]
            expected += p * max(counts)
        assert busiest_experts(experts, share, chips) == math.ceil(expected - 1e-9)
    assert busiest_experts(128, 8 / 128, 1) == 8  # one chip: the expected count
    # DeepSeek-V3's 256 experts on 8 chips, one sequence (8 experts): the busiest holds 3
    assert busiest_experts(32, 8 / 256, 8) == 3
