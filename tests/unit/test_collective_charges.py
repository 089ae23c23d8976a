"""Where collectives are charged: per produced tensor and layout, per step for weight
gradients, across the boundary of a repeated layer. Numbers by hand."""

from __future__ import annotations

import pytest
from solver_fixtures import small_system

from generator.graph import Kernel, KernelGraph, KernelKind, Operand, OperandRole, Pass
from solver.cost.menus import build_problem

T, H = 4096, 1024  # tokens, hidden


def norm_wgrad() -> Kernel:
    """dgamma[h] = sum over tokens of dy[t, h] * xhat[t, h]: the LayerNorm weight gradient."""
    return Kernel(
        name="ln_weight_update",
        kind=KernelKind.NORM,
        dims=(("t", T), ("h", H)),
        operands=(
            Operand("dy", OperandRole.INPUT, ("t", "h"), 2),
            Operand("in", OperandRole.INPUT, ("t", "h"), 2),
            Operand("dweight", OperandRole.OUTPUT, ("h",), 2),
        ),
        flop=2.0 * T * H,
        pass_=Pass.WGRAD,
        shardable_dims=("t",),
    )


def _problem(graph, system, micro_batches=1, tp=2):
    span = [(system.network[0], tp)]
    return build_problem(
        graph,
        system.chip,
        system.dram.bandwidth_Bps,
        tp,
        span,
        {"tp": span},
        "bf16",
        dataflow=False,
        overlap=True,
        max_configs=0,
        micro_batches=micro_batches,
    )


def test_sequence_parallel_norm_gradient_is_all_reduced_once_per_step():
    system = small_system(num_chips=2, link_Bps=5e9)  # ring of 2, 5 GB/s, 1 us per step
    graph = KernelGraph("g", (norm_wgrad(),))
    # the all-reduce of dgamma (1024 x 2 B) over 2 chips: 2 x 1/2 x 2048 B / 5 GB/s + 2 x 1 us
    full = 2048 / 5e9 + 2e-6
    per_mb = _problem(graph, system, micro_batches=1).kernels[0]
    per_step = _problem(graph, system, micro_batches=8).kernels[0]
    (ar,) = [o for o in per_mb.options if o.sharding == "t"]
    assert ar.network_s == pytest.approx(full)
    (ar8,) = [o for o in per_step.options if o.sharding == "t"]
    # 8 micro-batches share one all-reduce: each instance carries 1/8 of it
    assert ar8.network_s == pytest.approx(full / 8)
    assert ar8.network_bytes == pytest.approx(2048 / 8)
    # reduce-scattered gradient (1/2 x 2048 B / 5 GB/s + 1 us), likewise once per step
    (rs8,) = [o for o in per_step.options if o.sharding == "t+rs"]
    assert rs8.network_s == pytest.approx((1024 / 5e9 + 1e-6) / 8)
    # replicated options have no reduction to defer
    for a, b in zip(per_mb.options, per_step.options):
        if a.sharding.split("+")[0] != "t":
            assert a.network_s == b.network_s
