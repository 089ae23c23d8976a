"""MoE parallel layouts against numbers worked out by hand (issue #35 item 1): which chips
form an EP group (Megatron-core's rank order), the bytes and time of a dispatch, the
per-expert pricing of grouped GEMMs, the expert layouts the search tries.

The tiny model of tests/unit/test_expert_parallel.py: hidden 256, 4 layers, 4 heads, 8
experts of SwiGLU width 512, top-2; 2 sequences of 128 tokens per micro-batch (T = 256).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from generator.build import build_workload
from hardware import library
from hardware.system import Chip, CollectiveEfficiency, Efficiency, NetworkLevel, Topology
from hardware.topology import collective_efficiency
from mapshard import pipeline
from schema import setup_pb2
from solver.cost.collectives import hierarchical_time, level_collective_time
from solver.cost.gemm_roles import gemm_roles
from solver.cost.kernel_times import GemmShape, gemm_compute_time
from solver.cost.menus import GROUPED_DIM
from solver.cost.own_network import own_network
from solver.search.degrees import fits_expert_layout
from solver.search.expert_group import (
    DEEPEP_NVLINK_SHARE,
    expert_parallel_degree,
    expert_parallel_groups,
    expert_span,
    one_group_per_level,
)
from solver.search.parallel import Choice, place

H, F, E, K, TOKENS = 256, 512, 8, 2, 256
GB = 1e9


def tiny_moe(ep: int = 0, etp: int = 0, chips: int = 16, dispatcher: int = 0):
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    m = t.model.inline
    m.name, m.architecture, m.hidden_size, m.num_layers = "tiny-moe", "mixtral", H, 4
    m.num_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size = 4, 4, F, 1000
    m.num_experts, m.experts_per_token = E, K
    m.ffn, m.norm = setup_pb2.SWIGLU, setup_pb2.RMSNORM
    t.global_batch, t.micro_batch, t.seq_len = 16, 2, 128
    t.expert_parallel, t.expert_tensor_parallel, t.moe_dispatcher = ep, etp, dispatcher
    t.zero_stage, t.virtual_pipeline, t.sequence_parallel = 1, 1, True
    return build_workload(s, Path("setup.txt"), chips)


def kernel(workload, name: str):
    return next(k for k in workload.phases[0].graph.kernels if k.name == name)


def variant(workload, ep: int, fold: bool):
    return next(
        v
        for v in workload.variants
        if v.expert_parallel == ep and (v.expert_tensor_parallel == 1) == fold
    )


def node_of(rank: int, chips_per_node: int = 8) -> int:
    return rank // chips_per_node


# ---------------------------------------------------------------------------------------
# Which chips form an EP group
# ---------------------------------------------------------------------------------------


def test_megatron_ep_groups_fold_over_tp_inside_a_node():
    # 16 chips, 8 per node, TP 2, DP 8 (all data ranks), EP 8. Expert view ETP x EP x EDP:
    # ETP 1: EDP = 2 x 8 / 8 = 2, the EP groups are 8 consecutive ranks, one node each
    folded = expert_parallel_groups(tp=2, cp=1, dp=8, pp=1, ep=8, etp=1)
    assert folded == [tuple(range(0, 8)), tuple(range(8, 16))]
    assert all(len({node_of(r) for r in g}) == 1 for g in folded)
    # ETP 2 (= TP): EDP = 16 / 16 = 1, the groups are the chips of one TP index, stride 2:
    # they span both nodes
    flat = expert_parallel_groups(tp=2, cp=1, dp=8, pp=1, ep=8, etp=2)
    assert flat == [tuple(range(0, 16, 2)), tuple(range(1, 16, 2))]
    assert all(len({node_of(r) for r in g}) == 2 for g in flat)
    # a second pipeline stage repeats the pattern 16 ranks on
    two = expert_parallel_groups(tp=2, cp=1, dp=4, pp=2, ep=4, etp=1)
    assert two == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)]


def test_the_choice_places_the_ep_group_as_megatron_does():
    node = NetworkLevel("node", Topology.SWITCH, 8, 450 * GB)
    net = NetworkLevel("net", Topology.SWITCH, 2, 50 * GB)
    levels = (node, net)
    # folded: EP 8 = TP 2 x 4 TP groups carved from the data ranks; TP, CP, EP, DP, PP
    spans = place(levels, ("TP", "CP", "EP", "DP", "PP"), {"TP": 2, "EP": 4, "DP": 2})
    assert spans is not None
    deg = (("CP", 1), ("DP", 2), ("EP", 4), ("PP", 1), ("TP", 2))
    choice = Choice(deg, spans, levels)
    fold = variant(tiny_moe(ep=8), 4, True)
    group = expert_span(fold, choice, levels)
    # the EP group: 2 x 4 chips of the node level, one group of 8 on it (one NVLink node,
    # as ranks 0..7)
    assert [(lv.name, p) for lv, p in group] == [("node", 8)]
    assert expert_parallel_degree(fold, choice) == (8, 1)
    # unfolded: EP 8 TP groups of 2 chips need 16 chips: the group crosses the nodes
    spans = place(levels, ("TP", "CP", "EP", "DP", "PP"), {"TP": 2, "EP": 8})
    assert spans is not None
    flat = Choice((("CP", 1), ("DP", 1), ("EP", 8), ("PP", 1), ("TP", 2)), spans, levels)
    unfold = variant(tiny_moe(ep=8), 8, False)
    assert [(lv.name, p) for lv, p in expert_span(unfold, flat, levels)] == [
        ("node", 4),
        ("net", 2),
    ]
    assert expert_parallel_degree(unfold, flat) == (8, 2)


def test_the_search_pairs_ep_tp_groups_with_tp_to_the_given_ep():
    w = tiny_moe(ep=8)
    assert {"expert_parallel", "expert_tensor_parallel"} <= set(w.searched)
    layouts = {(v.expert_parallel, v.expert_tensor_parallel) for v in w.variants}
    # unfolded: 8 TP groups; folded: 1, 2, 4 or 8 TP groups of TP chips, EP / TP of them
    assert layouts == {(8, 0), (1, 1), (2, 1), (4, 1), (8, 1)}

    def choice(tp: int, ep: int) -> Choice:
        return Choice((("EP", ep), ("TP", tp)), (), ())

    assert fits_expert_layout(variant(w, 4, True), choice(2, 4))  # 4 x 2 = 8
    assert not fits_expert_layout(variant(w, 4, True), choice(4, 4))  # 16 chips, 8 experts
    assert not fits_expert_layout(variant(w, 8, True), choice(1, 8))  # TP 1: unfolded's
    assert fits_expert_layout(variant(w, 8, False), choice(4, 8))


# ---------------------------------------------------------------------------------------
# The dispatch: bytes and time
# ---------------------------------------------------------------------------------------


def test_dispatch_bytes_are_tokens_x_topk_x_hidden_x_bytes_x_ep_minus_1_over_ep():
    fold = variant(tiny_moe(ep=8), 4, True)
    disp = kernel(fold, "dispatch")
    assert disp.pinned_sharding == "tokens"  # each chip dispatches its own tokens
    assert kernel(fold, "expert_gate_up").pinned_sharding == "experts"
    assert kernel(fold, "combine").pinned_sharding == "experts"
    # EP on the TP chips alone (1 TP group): the routing table's dim is every expert there
    alone = variant(tiny_moe(ep=8), 1, True)
    assert kernel(alone, "dispatch").pinned_sharding == "tokens"
    assert kernel(alone, "dispatch_bwd").pinned_sharding == "experts"
    assert kernel(alone, "combine_bwd").pinned_sharding == "tokens"
    node = NetworkLevel("node", Topology.SWITCH, 8, 450 * GB)
    tp_span, ep_span = ((node, 2),), ((node, 2), (node, 4))
    _, sent, label = own_network(disp, "tokens", 2, tp_span, {"ep": ep_span}, 0.0)
    # a chip holds 256 / 2 tokens, sends 2 copies of each (256 BF16 values) to the 7 of
    # its 8 EP peers that own the other experts: 128 x 2 x 256 x 2 B x 7/8
    assert sent == pytest.approx(TOKENS / 2 * K * H * 2 * 7 / 8)
    # no all-reduce over TP: the tokens go to their experts' chips by the all-to-all
    assert label.startswith("all_to_all") and "over tp" not in label


def test_a_small_layouts_dispatch_time_by_hand():
    # EP 8 = 4 chips in a node (NVLink 450 GB/s, 3 us) x 2 nodes (50 GB/s, 10 us), no
    # calibration curve; each chip holds D = 256 x 2 x 256 x 2 B of routed tokens. Level by
    # level: 3/4 of D over NVLink, then 1/2 of D over the network, one latency step each.
    eff = CollectiveEfficiency()
    node = NetworkLevel("node", Topology.SWITCH, 4, 450 * GB, 3e-6, efficiency=eff)
    net = NetworkLevel("net", Topology.SWITCH, 2, 50 * GB, 10e-6, efficiency=eff)
    d = TOKENS * K * H * 2
    expected = 3 / 4 * d / 450e9 + 3e-6 + 1 / 2 * d / 50e9 + 10e-6
    disp = kernel(variant(tiny_moe(ep=8), 8, False), "dispatch")
    t, _, _ = own_network(disp, "none", 1, (), {"ep": ((node, 4), (net, 2))}, 0.0)
    assert t == pytest.approx(expected)
    # one level split between TP 2 and 4 EP ranks is one all-to-all over 8: 7/8 of D, one
    # step (two distinct levels stay level by level: 1/2 + 3/4 of D)
    node8 = replace(node, degree=8)
    span = one_group_per_level(((node8, 2), (node8, 4)))
    assert hierarchical_time("all_to_all", 8 * d, span) == pytest.approx(7 / 8 * d / 450e9 + 3e-6)
    other = replace(node8, name="node_ep")
    assert hierarchical_time("all_to_all", 8 * d, ((node8, 2), (other, 4))) == pytest.approx(
        (1 / 2 + 3 / 4) * d / 450e9 + 2 * 3e-6
    )


def test_deepep_runs_at_its_published_share_of_the_link_without_chunk_sorts():
    node = NetworkLevel("node", Topology.SWITCH, 8, 200 * GB, 0.0)
    # EP 4: 2 experts per TP group, whose received chunks NCCL's dispatcher sorts
    w = tiny_moe(ep=4, etp=2, dispatcher=setup_pb2.MOE_DISPATCHER_DEEPEP)
    assert w.moe_dispatcher == "deepep"
    names = {k.name for k in w.phases[0].graph.kernels}
    assert "expert_sort" not in names  # the NCCL dispatcher's chunk sort is fused away
    assert "expert_sort" in {k.name for k in tiny_moe(ep=4, etp=2).phases[0].graph.kernels}
    choice = Choice((("EP", 8), ("TP", 1)), (("EP", ((node, 8),)),), (node,))
    (lv, p), = expert_span(w, choice, (node,))  # fmt: skip
    d = 1e8
    # 153 of H800's 200 GB/s: 7/8 of each chip's 100 MB at 153 GB/s
    t = hierarchical_time("all_to_all", d * p, ((lv, p),))
    assert DEEPEP_NVLINK_SHARE == pytest.approx(0.765)
    assert t == pytest.approx(7 / 8 * d / 153e9)


# ---------------------------------------------------------------------------------------
# Grouped GEMMs at the per-expert shape
# ---------------------------------------------------------------------------------------


def test_grouped_experts_pay_each_experts_tile_waves():
    # 8 cores, 128 x 128 tiles: one expert's 128 x 256 output is at best 4 half tiles
    # (64 x 128) on 8 cores, half the machine, K = 256 leaves no split-K; 8 experts as one
    # strided batched kernel fill 2 waves of 128 x 128 tiles exactly
    eff = Efficiency(gemm_util=1.0, gemm_tile_m=128, gemm_tile_n=128)
    chip = Chip("toy", 8, {"bf16": 1e15}, 1e12, 1e6, 1e9, efficiency=eff)
    m, n, k, experts = 128, 256, 256, 8
    flop = experts * 2 * m * n * k
    batched = gemm_compute_time(chip, GemmShape(m, n, k, experts), flop, "bf16")
    grouped = gemm_compute_time(chip, GemmShape(m, n, k, experts, grouped=True), flop, "bf16")
    assert batched.seconds == pytest.approx(flop / 1e15)
    assert grouped.seconds == pytest.approx(flop / (1e15 * 0.5))
    assert "per-expert shape x 8" in grouped.source


def test_expert_gemms_are_grouped_and_the_rest_are_not():
    up = kernel(variant(tiny_moe(ep=8), 8, False), "expert_gate_up")
    _, _, _, batch, m, _, _ = gemm_roles(up)
    assert batch == [GROUPED_DIM] and m == ["expert_tokens"]


# ---------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------


def test_a_folded_layout_runs_and_reports_megatrons_ep_and_etp(tmp_path):
    text = """
workload { llm_training {
  model { inline { name: "tiny-moe" architecture: "mixtral" hidden_size: 256 num_layers: 4
    num_heads: 4 num_kv_heads: 4 intermediate_size: 512 vocab_size: 1000 num_experts: 8
    experts_per_token: 2 ffn: SWIGLU norm: RMSNORM } }
  global_batch: 16 micro_batch: 2 seq_len: 128 expert_parallel: 8 expert_tensor_parallel: 1
  sequence_parallel: true zero_stage: 1 virtual_pipeline: 1 recompute: RECOMPUTE_NONE } }
system { chip: "H100-SXM5-80GB" num_chip: 8
  topology { name: "nvl" kind: SWITCH degree: 8 link_bw_GBps: 450 } }
execution { placement: "TP=nvl:2, EP=nvl:4" }
"""
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    # EP 8 = TP 2 x 4 TP groups, all in the one 8-chip node; each chip whole experts
    assert plan.parallelism["ep"] == 8 and plan.parallelism["etp"] == 1
    assert plan.parallelism["tp"] == 2
    layer = next(p for p in plan.phases if p.name == "layer")
    disp = next(k for k in layer.kernels if k.name == "dispatch")
    assert disp.sharding == "tokens" and disp.collective.startswith("all_to_all")
    assert "over tp" not in disp.collective
    # each chip's 128 tokens x 2 copies x 256 x 2 B, 7/8 of them to its peers
    assert disp.network_bytes == pytest.approx(TOKENS / 2 * K * H * 2 * 7 / 8)


def test_the_h100_all_to_all_runs_at_nccls_measured_curve_not_the_all_reduces():
    # NCCL 2.29.2 alltoall on 8 H100s (aiconfigurator-core's nccl table): 128 Mi fp16
    # elements (256 MiB per GPU) in 763.9 us. The chip file's point: 7/8 x 256 MiB in
    # 763.9 - 12.8 us at 0.695 x 450 GB/s
    entry = next(
        e for e in library.find_chip("H100-SXM5-80GB").accelerator.efficiency.collective
        if e.level == 0
    )  # fmt: skip
    nvl = NetworkLevel(
        "nvl", Topology.SWITCH, 8, 450 * GB, 0.0, efficiency=collective_efficiency(entry)
    )
    d = 268435456
    t = level_collective_time("all_to_all", 8 * d, 8, nvl)
    assert t == pytest.approx(7 / 8 * d / (0.695 * 450e9) + 12.8e-6)
    assert t == pytest.approx(763.9e-6, rel=2e-3)
    # the all-reduce keeps its NVLS curve: 0.963 of the link at 256 MiB
    ar = level_collective_time("all_reduce", d, 8, nvl)
    assert ar == pytest.approx(2 * 7 / 8 * d / (0.963 * 450e9) + 2 * 12.8e-6)
