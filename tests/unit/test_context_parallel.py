"""Context parallelism (ring attention) against numbers worked out by hand (issue #16)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from training_fixtures import tiny_training

from generator.graph import KernelKind, Pass
from hardware.system import NetworkLevel, Topology
from mapshard import pipeline
from mapshard.fidelity.fit import library_system
from schema.errors import SetupError
from solver.search.context_parallel import (
    attention_seconds,
    kv_block_bytes,
    merge_bytes,
    ring_exposed_s,
    stage_ring_s,
)

SW = NetworkLevel("sw", Topology.SWITCH, 4, 100e9, parallelism=("CP",))


def tiny(cp: int):
    return tiny_training(cp=cp, chips=cp)


def test_ring_hops_hide_under_one_step_of_attention_each():
    # one K/V block of 1e8 bytes at 100 GB/s: 1 ms a hop forward, 2 ms backward (K/V and
    # their gradients); CP 4, attention 2 ms forward / 4 ms backward -> 0.5 / 1 ms a step:
    # exposed 3 x (1 - 0.5) + 3 x (2 - 1) = 4.5 ms; moved 3 x (1 + 2) = 9 ms
    exposed, moved = ring_exposed_s(1e8, ((SW, 4),), 4, 2e-3, 4e-3)
    assert exposed == pytest.approx(4.5e-3) and moved == pytest.approx(9e-3)
    # attention long enough: the ring is hidden entirely
    assert ring_exposed_s(1e8, ((SW, 4),), 4, 1.0, 1.0)[0] == 0.0


def test_one_rank_holds_s_over_cp_tokens_against_all_keys():
    one, four = tiny(1), tiny(4)
    # every GEMM is linear in the rank's tokens and attention is (s/4 queries) x (s keys):
    # the layer graph's FLOP is exactly a quarter, plus the sum that accumulates the K/V
    # gradients coming back around the ring (into the rotary kernel that made them): 64
    # tokens x (K, V) x 4 heads x 64 dims
    acc = next(k for k in four.phases[0].graph.kernels if k.name == "kv_rope_grad_sum")
    assert acc.flop == 64 * 2 * 4 * 64
    rest = four.phases[0].graph.flop - acc.flop
    assert rest == pytest.approx(one.phases[0].graph.flop / 4)
    # fused attention forward, non-causal: 4 b s_q s_kv h = 4 x 2 x 32 x 128 x 256 FLOP
    att = next(
        k for k in four.phases[0].graph.kernels
        if k.kind == KernelKind.ATTENTION and k.pass_ == Pass.FWD
    )  # fmt: skip
    assert att.flop == 4 * 2 * 32 * 128 * 256
    # the rank's K/V block: 64 tokens x 4 heads x 64 dims x (K, V) x 2 bytes = 65536 bytes
    assert kv_block_bytes(four, four.phases[0], tp=1) == 64 * 4 * 64 * 2 * 2


def test_cp_runs_end_to_end_and_reports_its_degree(tmp_path):
    text = """
workload { llm_training { model { hf_model: "Llama-3.1-8B" } global_batch: 8 micro_batch: 1
  seq_len: 8192 context_parallel: 2 } }
system { chip: "H100-SXM5-80GB" num_chip: 8 }

"""
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    assert plan.parallelism["cp"] == 2
    assert plan.parallelism["tp"] * plan.parallelism["pp"] * plan.parallelism["dp"] == 4


def test_cp_tags_must_match_the_workload(tmp_path):
    text = """
workload { llm_training { model { hf_model: "Llama-3.1-8B" } global_batch: 8 seq_len: 4096
  context_parallel: 4 } }
system { chip: "H100-SXM5-80GB" num_chip: 8
  topology { kind: SWITCH degree: 8 parallelism: "CP" } }
"""
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    with pytest.raises(SetupError, match="tagged CP multiply to 8 but the workload's"):
        pipeline.load_scenario(tmp_path)


def test_partial_results_merge_at_dram_speed_on_the_busiest_rank():
    four = tiny(4)
    layer = four.phases[0]
    # CP 4: 64 tokens a rank; Q = 64 x 4 heads x 64 dims = 16384 elements, its K/V block
    # 64 x 4 KV heads x 64 x 2 = 32768; 2-byte elements:
    #   forward  zeroing Q + 4 steps x 3 Q passes          = 16384 + 196608
    #   backward 4 steps x 3 Q (dq) + 3 x (1 + 3/2) KV      = 196608 + 245760
    # = 655360 elements x 2 bytes = 1310720 bytes
    assert merge_bytes(four, layer, tp=1, cp=4) == 1310720
    # TP 2 halves the heads and the KV heads of a rank
    assert merge_bytes(four, layer, tp=2, cp=4) == 655360
    assert merge_bytes(tiny(1), tiny(1).phases[0], tp=1, cp=1) == 0.0
    # attention long enough to hide every hop: the stage pays the merges alone, 4 layers x
    # 1310720 bytes at 1e12 B/s = 5.24288 us
    attention = {p.name: (1.0, 1.0) for p in four.phases}
    total = stage_ring_s(four, ((SW, 4),), 1, 1, attention, 1e12)
    assert layer.count == 4
    assert total == pytest.approx(4 * 1310720 / 1e12)


def test_the_hops_hide_under_the_attention_kernels_own_time_by_hand():
    # CP 2, TP 2 on H100: a rank holds 64 of each sequence's 128 tokens against all 128
    # keys; 2 sequences x 4 heads / TP 2 = 4 (sequence, head) pairs on a chip. Forward:
    # 4 x 2 x 64 x 128 x 4 x 64 FLOP / TP 2; one 128-token tile executes whole (share 1);
    # at cuDNN's 0.955 of 989.4 TFLOP/s, one exponential per score at 16 per clock on 132
    # SMs at 1.83 GHz, and one wave (4 items <= 132 SMs) of 2.25 us
    chip = library_system("H100-SXM5-80GB").chip
    two = tiny_training(cp=2, chips=2)
    fwd, bwd = attention_seconds(two, chip, tp=2)[two.phases[0].name]
    products = 4 * 2 * 64 * 128 * 4 * 64 / 2 / (989.4e12 * 0.955)
    exps = 4 * 64 * 128 / (16 * 132 * 1.83e9)
    assert fwd == pytest.approx(products + exps + 2.25e-6, rel=1e-9)
    # the backward's two kernels (dQ, and dK/dV) at 0.71 and 12.25 us a wave each, with
    # half an exponential per score each; the backward's five score-sized products (P
    # recomputed, dP, dS^T Q, dS K, P^T dO) against the forward's two: 2.5x the forward's
    # FLOP over the two kernels
    bwd_flop = 2.5 * 4 * 2 * 64 * 128 * 4 * 64 / 2
    bwd_products = bwd_flop / (989.4e12 * 0.71)
    assert bwd == pytest.approx(bwd_products + 2 * (exps / 2 + 12.25e-6), rel=1e-9)
    # the FLOP share it replaced gave every kernel family the same window; FlashAttention-2
    # (0.40 of the peak) stretches it
    families = chip.efficiency.causal_attention
    fa2 = replace(chip, efficiency=replace(chip.efficiency, causal_attention=families[1:]))
    assert attention_seconds(two, fa2, tp=2)[two.phases[0].name][0] > fwd
