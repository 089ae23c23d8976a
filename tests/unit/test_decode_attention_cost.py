"""Decode attention as a physical cost (setup.proto DecodeAttention), every number by hand.

Llama-3.1-70B: 80 layers, 64 query heads over 8 KV heads (G = 8), head_dim 128. One decode
step of 64 sequences at a KV length of 3072 (2048 prompt tokens + 1024 generated) reads per
layer K and V x 8 heads x 128 x 3072 tokens x 64 sequences = 402,653,184 cached elements:
805,306,368 bytes in BF16, 402,653,184 in FP8; x 80 layers per step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import Kernel, OperandRole
from generator.llm_inference import mean_paged_len, paged_len
from mapshard import pipeline
from schema import setup_pb2
from solver.cost.kernel_times import conversion_rate

SHARED, PER_HEAD = setup_pb2.KV_SHARED, setup_pb2.KV_PER_QUERY_HEAD
ELEMENTS = 2 * 8 * 128 * 3072 * 64  # cached K and V elements one layer reads once
H100_DRAM_BPS = 3.35e12 * 0.866  # datasheet HBM3 x the chip file's copy efficiency
H100_CONVERSIONS = 132 * 16 * 1.83e9  # SMs x conversions per clock x the chip file's clock


def _setup(model: str, family: int, kv: int, share: float = 0.0, **req: int) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = model
    i.phase, i.batch, i.context_len = setup_pb2.DECODE, 64, 3072
    for k, v in req.items():
        setattr(i, k, v)
    i.decode_attention, i.kv_reread_dram_share = family, share
    s.workload.precision.kv_cache = kv
    return s


def _attention(s: setup_pb2.Setup) -> tuple[Kernel, int]:
    """The decode layer's attention kernel and the layer count."""
    layer = build_workload(s, Path("setup.txt"), 1).phases[0]
    return layer.graph.kernel("attention"), layer.count


def _kv_bytes(k: Kernel) -> float:
    return sum(k.operand_bytes(o) for o in k.operands if o.role == OperandRole.KV_CACHE)


@pytest.mark.parametrize("kv,bpe", [(setup_pb2.BF16, 2), (setup_pb2.FP8, 1)])
def test_kv_bytes_per_step_are_one_read_of_each_kv_head_in_both_families(kv, bpe):
    """Group-aware: every KV head once. Per query head: the 8 blocks of a group each
    stream the KV head but the L2 serves the 7 repeats, so DRAM still sees one read."""
    for family in (SHARED, PER_HEAD):
        att, layers = _attention(_setup("Llama-3.1-70B", family, kv))
        assert layers == 80
        assert _kv_bytes(att) == ELEMENTS * bpe
        assert _kv_bytes(att) * layers == {2: 64_424_509_440, 1: 32_212_254_720}[bpe]


def test_repeats_that_miss_the_l2_add_their_share_of_the_g_minus_1_reads():
    """kv_reread_dram_share s: 1 + 7 s reads of each KV head reach DRAM (s = 1: all 8)."""
    for share, reads in ((1.0, 8), (0.5, 4.5)):
        att, _ = _attention(_setup("Llama-3.1-70B", PER_HEAD, setup_pb2.FP8, share))
        assert _kv_bytes(att) == pytest.approx(reads * ELEMENTS, rel=1e-12)


def test_per_query_head_runs_on_the_vector_unit_and_converts_an_8_bit_cache_per_head():
    """FP8 cache: every element converted once per query head, 8 x 402,653,184; a 16-bit
    cache is the compute type (no conversion); the group-aware kernel is a matrix kernel."""
    att, _ = _attention(_setup("Llama-3.1-70B", PER_HEAD, setup_pb2.FP8))
    assert att.unit == "vector" and att.converted_elements == 8 * ELEMENTS == 3_221_225_472
    att16, _ = _attention(_setup("Llama-3.1-70B", PER_HEAD, setup_pb2.BF16))
    assert att16.unit == "vector" and att16.converted_elements == 0
    shared, _ = _attention(_setup("Llama-3.1-70B", SHARED, setup_pb2.FP8))
    assert shared.unit == "" and shared.converted_elements == 0
    assert att.flop == shared.flop == 4 * 64 * 3072 * 64 * 128  # 4 b s_kv heads head_dim


def test_paged_cache_reads_whole_pages():
    """A 3000-token context in 64-token pages reads 47 pages = 3008 tokens; a REQUEST's
    steps attending to 1..128 keys read 64 (64 steps) then 128 (64 steps): mean 96; without
    pages the mean of 1..128 is 64.5, rounded up 65."""
    assert paged_len(3000, 64) == 3008 and paged_len(3000, 0) == 3000
    assert mean_paged_len(1, 128, 64) == 96 and mean_paged_len(1, 128, 0) == 65
    att, _ = _attention(
        _setup("Llama-3.1-70B", SHARED, setup_pb2.FP8, context_len=3000, kv_page_tokens=64)
    )
    assert _kv_bytes(att) == 2 * 8 * 128 * 3008 * 64


def _step_kernel(family: int) -> tuple[float, float]:
    """(compute_s, memory_s) of the attention kernel of a Llama-3.1-8B decode step (32 query
    over 8 KV heads, G = 4) at batch 64, KV length 3072, FP8 cache, on one H100 priced by the
    model alone (kernel_source "none": by default its decode attention reads the tables)."""
    s = _setup("Llama-3.1-8B", family, setup_pb2.FP8)
    text_format.Parse('system { chip: "H100-SXM5-80GB" num_chip: 1 kernel_source: "none" }', s)
    s.execution.execution_style = setup_pb2.KERNEL_BY_KERNEL
    loaded = pipeline.load_message(s, Path("setup.txt"))
    plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
    layer = next(p for p in plan.phases if p.role == "layer")
    k = next(k for k in layer.kernels if k.name == "attention")
    return k.compute_s, k.memory_s


def test_a_decode_steps_attention_time_by_hand():
    """Group-aware: DRAM-bound, the 402,653,184 cached bytes plus the 16-bit query and
    output (64 x 32 heads x 128 x 2 bytes each) at 3.35 TB/s x 0.866: 139.2 us. Per query
    head: the same bytes, but 4 conversions of each cached element at 132 SMs x 16 per clock
    x 1.83 GHz: 1,610,612,736 / 3.865e12 = 416.7 us, 3.0x the DRAM time."""
    dram_s = (ELEMENTS + 2 * 64 * 32 * 128 * 2) / H100_DRAM_BPS
    compute_s, memory_s = _step_kernel(SHARED)
    assert memory_s == pytest.approx(dram_s, rel=1e-9) and compute_s < memory_s
    compute_s, memory_s = _step_kernel(PER_HEAD)
    assert memory_s == pytest.approx(dram_s, rel=1e-9)
    overhead_s = 4.5e-6  # the H100 file's kernel_overhead_us
    assert compute_s == pytest.approx(4 * ELEMENTS / H100_CONVERSIONS + overhead_s, rel=1e-9)
    assert compute_s / memory_s == pytest.approx(3.0, abs=0.05)


def _chip(name: str):
    s = _setup("Llama-3.1-8B", SHARED, setup_pb2.BF16)
    text_format.Parse(f'system {{ chip: "{name}" num_chip: 1 }}', s)
    return pipeline.resolve(pipeline.load_message(s, Path("setup.txt"))).chip


def test_the_conversion_rate_is_sms_x_16_per_clock():
    """H100 and H200: 132 SMs x 16 x 1.83 GHz = 3.865e12 per second (the same on both: an
    FP8 per-query-head step is no faster on H200's faster memory). B200's file gives no
    clock: 80 TFLOP/s FP32 / (2 x 128 lanes) x 16 = 5.0e12."""
    assert conversion_rate(_chip("H100-SXM5-80GB")) == pytest.approx(H100_CONVERSIONS)
    assert conversion_rate(_chip("H200-SXM-141GB")) == pytest.approx(H100_CONVERSIONS)
    assert conversion_rate(_chip("B200")) == pytest.approx(80e12 / 256 * 16)
