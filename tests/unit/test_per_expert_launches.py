"""FP8 quantisations an MoE layer issues expert by expert (Kernel.per_expert_launches):
Transformer Engine's GroupedLinear splits its input (or output gradient) by expert and
quantizes each part with its own scale, so each of those kernels is launched once per expert
the chip holds: one kernel overhead each (solver.cost.menus.launch_count)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import KernelGraph
from generator.proto_graph import graph_from_proto
from generator.proto_write import graph_to_proto
from mapshard.fidelity.fit import library_system
from schema import setup_pb2
from solver.cost.kernel_times import HOST_SOURCE
from solver.cost.menus import launch_count, sharding_choices
from tests.solver_fixtures import one_kernel_menu

PER_EXPERT, GROUPED = setup_pb2.MOE_GEMM_PER_EXPERT, setup_pb2.MOE_GEMM_GROUPED
# the quantisations of the two expert GEMMs' inputs (forward) and output gradients
# (backward), each an amax and a cast kernel (generator/ops_fp8.py), named by hand
EXPERT_QUANTIZE = {
    f"expert_{gemm}_{what}_{kernel}"
    for gemm, what in (("gate_up", "in"), ("down", "in"), ("down", "grad"), ("gate_up", "grad"))
    for kernel in ("amax", "cast")
}


def _layer(moe_gemm: int, experts: int, ep: int, fp8: bool = True) -> KernelGraph:
    """One training layer of a small Qwen3-style MoE (top-8 of `experts` experts of 768)
    with EP `ep` over as many chips (TP 1)."""
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", ep
    t = s.workload.llm_training
    m = t.model.inline
    m.name, m.architecture, m.hidden_size, m.num_layers = "moe", "qwen3_moe", 1024, 2
    m.num_heads, m.num_kv_heads, m.head_dim, m.vocab_size = 16, 4, 64, 32000
    m.intermediate_size, m.num_experts, m.experts_per_token = 768, experts, 8
    m.ffn, m.norm = setup_pb2.SWIGLU, setup_pb2.RMSNORM
    t.global_batch, t.micro_batch, t.seq_len = ep, 1, 2048
    t.moe_gemm, t.expert_parallel = moe_gemm, ep
    if fp8:
        s.workload.precision.math = setup_pb2.FP8
    w = build_workload(s, Path("setup.txt"), ep)
    return next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))


def _flagged(graph: KernelGraph) -> set[str]:
    return {k.name for k in graph.kernels if k.per_expert_launches}


def test_the_expert_gemms_quantisations_are_issued_per_expert():
    assert _flagged(_layer(PER_EXPERT, 128, 8)) == EXPERT_QUANTIZE
    # one grouped kernel quantizes once; BF16 has no quantisation
    assert _flagged(_layer(GROUPED, 128, 8)) == set()
    assert _flagged(_layer(PER_EXPERT, 128, 8, fp8=False)) == set()


def test_a_flagged_kernels_overhead_counts_the_chips_experts():
    """On one chip of EP e, 128 / e experts, all reached by 2,048 tokens x top-8: that many
    kernel overheads; the other quantisations (attention's) keep one."""
    system = library_system("H100-SXM5-80GB")
    graph = _layer(PER_EXPERT, 128, 8)
    for k in graph.kernels:
        want = 128 // 8 if k.name in EXPERT_QUANTIZE else k.launches
        assert launch_count(k, 1) == want, k.name
    overhead = system.chip.efficiency.kernel_overhead_s
    assert overhead > 0
    for name in ("expert_down_in_amax", "expert_gate_up_grad_cast", "q_proj_in_amax"):
        menu = one_kernel_menu(next(k for k in graph.kernels if k.name == name), system)
        count = 16 if name.startswith("expert") else 1
        assert math.isclose(menu.overhead_s, count * overhead), name


def test_per_expert_launches_over_random_layouts():
    """Random expert counts and EP degrees: each flagged kernel's count is the chip's
    experts (experts / EP), computed here from the draw, never from the graph."""
    rng = random.Random(11)
    for _ in range(5):
        experts = rng.choice((16, 32, 64, 128))
        ep = rng.choice([d for d in (1, 2, 4, 8) if experts % d == 0])
        graph = _layer(PER_EXPERT, experts, ep)
        counts = {launch_count(k, 1) for k in graph.kernels if k.name in EXPERT_QUANTIZE}
        assert counts == {experts // ep}, (experts, ep, counts)


def test_the_flag_survives_the_graph_file():
    layer = _layer(PER_EXPERT, 128, 8)
    for name in ("expert_down_in_amax", "q_proj_in_amax"):
        alone = KernelGraph("g", (next(k for k in layer.kernels if k.name == name),))
        again = graph_from_proto(graph_to_proto(alone), path="x", name="g")
        assert _flagged(again) == _flagged(alone) == ({name} & EXPERT_QUANTIZE)


def test_split_experts_count_the_chips_share_and_the_fewest_sharding():
    """At TP 2 a kernel pinned to split `experts` runs ceil(E / 2) of the graph's E on a
    chip; left free to keep them whole too, the menu's one overhead takes the fewest."""
    layer = _layer(PER_EXPERT, 128, 8)
    amax = next(k for k in layer.kernels if k.name == "expert_down_in_amax")
    whole = amax.dim_sizes["experts"]
    assert whole == 16
    split = replace(amax, pinned_sharding="experts", shardable_dims=("experts",))
    assert launch_count(split, 2) == 8
    free = replace(amax, pinned_sharding="", shardable_dims=("experts",))
    assert set(sharding_choices(free, 2)) == {"none", "experts"}
    assert launch_count(free, 2) == 8
    kept = replace(amax, pinned_sharding="none", shardable_dims=("experts",))
    assert launch_count(kept, 2) == 16


def test_an_eager_host_issues_each_experts_quantisation():
    """With a host time per op h, a forward quantisation of E experts waits on E x h (its E
    kernel overheads included) when that is longer than its GPU time."""
    layer = _layer(PER_EXPERT, 128, 8)
    amax = next(k for k in layer.kernels if k.name == "expert_gate_up_in_amax")
    assert amax.host_loop_ops == 1
    base = library_system("H100-SXM5-80GB")
    h = 200e-6  # far above the kernel's GPU time, so the host binds
    chip = replace(base.chip, efficiency=replace(base.chip.efficiency, host_op_s=h))
    menu = one_kernel_menu(amax, replace(base, chip=chip))
    for o in menu.options:
        assert o.time_source == HOST_SOURCE
        assert o.compute_s + menu.overhead_s == pytest.approx(16 * h, rel=1e-12)
