"""The outer search's roofline bound: the chip's peak at the workload's math precision times
its calibrated efficiencies (not the highest peak the chip lists), and never above a plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from mapshard.scenario import scenario_options
from schema import setup_pb2
from solver.search.bounds import bytes_read_at_least
from solver.search.bounds import roofline_bound as _lower_bound
from solver.search.parallel import Choice


def _scenario(text: str):
    loaded = pipeline.load_message(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"))
    return pipeline.assemble(loaded, pipeline.resolve(loaded))


A100_FP16_GEMM = """
workload { gemm { M: 8192 K: 8192 N: 8192 } precision { math: FP16 } }
system { chip: "A100-SXM4-80GB" num_chip: 1 }
execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }
"""


def test_bound_uses_the_math_precision_peak_and_the_gemm_plateau():
    sc = _scenario(A100_FP16_GEMM)
    single = Choice(degrees=(), spans=(), levels=sc.system.network)
    lb = _lower_bound(sc.workload, sc.system, single, scenario_options(sc))
    # 2 x 8192^3 FLOP at 312 TF (FP16, not INT4's 1248) x 0.832 (A100 gemm_util)
    assert lb == pytest.approx(2 * 8192**3 / (312e12 * 0.832), rel=1e-9)


def test_bound_is_never_above_the_plan():
    sc = _scenario(A100_FP16_GEMM)
    plan = pipeline.plan(sc)
    for c in plan.choices:
        if c.latency_s is not None:
            assert c.lower_bound_s <= c.latency_s * (1 + 1e-9)
            # the bound is within the GEMM's k roll-off and wave losses of the plan
            assert c.lower_bound_s >= 0.9 * c.latency_s


QWEN3_MOE_DECODE = """
workload { llm_inference { model { hf_model: "Qwen3-30B-A3B" } phase: DECODE batch: 8
  context_len: 4096 } }
system { chip: "H100-SXM5-80GB" num_chip: 8 }
"""


def test_an_expert_kernel_is_bounded_by_the_experts_its_tokens_reach():
    """One decode token per replica reaches 8 of Qwen3-30B-A3B's 128 experts: the bound reads
    8/128 of the expert weights (768 x 2048 x 2 gate/up + 2048 x 768 down, BF16, per
    expert), not all 128. It read all of them, so DP 8 (one sequence a replica) was pruned
    by a bound of >= 21 ms, above its own 6.5 ms plan, and a slower TP 4 x DP 2 plan was
    called optimal."""
    sc = _scenario(QWEN3_MOE_DECODE + 'execution { placement: "DP=scale_up:8" }')
    (replica,) = [v for v in sc.workload.variants if v.replicas == 8]
    kernels = [k for p in replica.phases for k in p.graph.kernels]
    experts = [k for k in kernels if k.expert_share < 1 and k.weight_bytes > 0]
    weights = sum(k.weight_bytes for k in experts)
    assert weights == 128 * 3 * 768 * 2048 * 2
    assert all(k.expert_share == pytest.approx(8 / 128) for k in experts)
    assert sum(bytes_read_at_least(k) for k in experts) == pytest.approx(weights * 8 / 128)
    pinned = pipeline.plan(sc)
    searched = pipeline.plan(_scenario(QWEN3_MOE_DECODE))
    assert searched.latency_s <= pinned.latency_s * (1 + 1e-9)
    for c in searched.choices:
        if c.latency_s is not None:
            assert c.lower_bound_s <= c.latency_s * (1 + 1e-9)
