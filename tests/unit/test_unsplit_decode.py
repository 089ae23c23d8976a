"""Decode attention without a KV split (setup.proto DecodeAttention KV_SHARED_UNSPLIT,
solver/cost/unsplit_decode.py) against numbers worked out by hand.

The H200 chip file's fit: one SM streams 45 GB/s, 2.9 us per wave of blocks; 132 SMs; a
2.0 us per-kernel overhead; DRAM 4.8 TB/s x 0.8595 (the chip file's copy efficiency).
Llama-3.1-8B's attention: 32 query heads over 8 KV heads of 128, so one block per
(sequence, KV head) streams 2 x kv_len x 128 x 2 bytes of BF16 K and V.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from mapshard.fidelity import fit_attention
from schema import setup_pb2
from schema.errors import SetupError

SM_BPS, WAVE_S, OVERHEAD_S, SMS = 45e9, 2.9e-6, 2.0e-6, 132
H200_DRAM_BPS = 4.8e12 * 0.8595


def _plan(batch: int, kv_len: int, family: str, chip: str = "H200-SXM-141GB", extra: str = ""):
    text = (
        f"workload {{ attention {{ batch: {batch} heads: 32 kv_heads: 8 head_dim: 128 "
        f"q_len: 1 kv_len: {kv_len} decode_attention: {family} }} }} "
        f'system {{ chip: "{chip}" num_chip: 1 {extra} }}'
    )
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    (kernel,) = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded))).phases[0].kernels
    return kernel


def test_a_few_blocks_stream_the_cache_at_one_sm_each():
    # batch 1: 8 blocks, one wave; each block 2 x 4096 x 128 x 2 = 2,097,152 bytes
    k = _plan(1, 4096, "KV_SHARED_UNSPLIT")
    by_hand = 2 * 4096 * 128 * 2 / SM_BPS + WAVE_S
    assert k.compute_s == pytest.approx(by_hand + OVERHEAD_S, rel=1e-9)
    assert k.time_source == "fitted unsplit decode attention (per-SM streaming)"
    # the whole cache, 8 x 2,097,152 bytes, at the DRAM bandwidth is far shorter
    assert k.memory_s < k.compute_s / 5


def test_blocks_beyond_the_sms_run_in_waves_and_the_dram_binds():
    # batch 256 x 8 KV heads = 2,048 blocks: 16 waves of 524,288-byte blocks (kv 1,024):
    # 16 x (11.65 + 2.9) us = 232.8 us, below the 1.07 GB cache at 4.126 TB/s = 260.2 us
    k = _plan(256, 1024, "KV_SHARED_UNSPLIT")
    waves = math.ceil(256 * 8 / SMS)
    assert waves == 16
    stream = waves * (2 * 1024 * 128 * 2 / SM_BPS + WAVE_S)
    assert k.compute_s == pytest.approx(stream + OVERHEAD_S, rel=1e-9)
    cache = 256 * 8 * 2 * 1024 * 128 * 2
    q_and_out = 2 * 256 * 32 * 128 * 2  # the query read, the output written
    assert k.memory_s == pytest.approx((cache + q_and_out) / H200_DRAM_BPS, rel=1e-9)
    assert k.bound == "memory"


def test_the_split_family_keeps_the_measured_table_and_an_uncalibrated_chip_prices_as_split():
    split = _plan(1, 4096, "KV_SHARED")
    assert split.time_source.startswith("measured:")
    assert split.compute_s < _plan(1, 4096, "KV_SHARED_UNSPLIT").compute_s / 3
    # the A100's file has no unsplit calibration: the split kernel's price (its measured
    # table), never faster than the split kernel
    a100 = _plan(1, 4096, "KV_SHARED_UNSPLIT", "A100-SXM4-80GB")
    a100_split = _plan(1, 4096, "KV_SHARED", "A100-SXM4-80GB")
    assert (a100.compute_s, a100.time_source) == (a100_split.compute_s, a100_split.time_source)


def test_one_query_head_per_kv_head_keeps_the_split_kernel():
    # MHA: PyTorch's flash kernel splits the cache for one query row, so the generators
    # leave the kernel group-aware with a split
    text = (
        "workload { attention { batch: 1 heads: 32 kv_heads: 32 head_dim: 128 q_len: 1 "
        "kv_len: 4096 decode_attention: KV_SHARED_UNSPLIT } } "
        'system { chip: "H200-SXM-141GB" num_chip: 1 }'
    )
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    (kernel,) = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded))).phases[0].kernels
    assert "unsplit" not in kernel.time_source


def test_a_negative_streaming_bandwidth_is_one_line_naming_the_field():
    bad = "accelerator { efficiency { unsplit_decode_attention { sm_stream_GBps: -1 } } }"
    with pytest.raises(SetupError, match="unsplit_decode_attention.sm_stream_GBps"):
        _plan(1, 1024, "KV_SHARED_UNSPLIT", extra=bad)


def test_the_fit_recovers_the_numbers_that_made_its_rows():
    points = []
    for batch, kv_len in ((1, 1024), (1, 8192), (16, 4096), (64, 1024)):
        p = fit_attention.DecodePoint("r", "H200-SXM-141GB", batch, 32, 8, 128, kv_len, 1.0)
        points.append(replace(p, measured_s=fit_attention.decode_model_seconds(p, 60.0, 1.5e-6)))
    found = fit_attention.fit_unsplit_decode(points)
    assert (found.util, round(found.wave_us, 9)) == (60.0, 1.5)
    assert found.mean_abs_err < 1e-12


def test_a_random_family_of_shapes_is_the_wave_formula_or_the_dram_bound():
    """20 drawn (batch, KV heads, group, head size, cache length): compute is the waves'
    streaming time (the FLOP side cannot bind: decode attention does 2 x group FLOP per K/V
    byte, at most 16 here, far below what even 30% of the BF16 peak over the DRAM allows),
    memory the cache plus the query read and output write at the DRAM bandwidth."""
    rng = random.Random(39)
    for _ in range(20):
        batch, kv_heads = rng.choice((1, 3, 16, 33, 64, 200)), rng.choice((1, 2, 4, 8))
        group, head_dim = rng.choice((2, 4, 8)), rng.choice((64, 128, 256))
        kv_len = rng.choice((64, 1000, 4096, 12345))
        text = (
            f"workload {{ attention {{ batch: {batch} heads: {kv_heads * group} "
            f"kv_heads: {kv_heads} head_dim: {head_dim} q_len: 1 kv_len: {kv_len} "
            'decode_attention: KV_SHARED_UNSPLIT } } system { chip: "H200-SXM-141GB" '
            "num_chip: 1 }"
        )
        setup = text_format.Parse(text, setup_pb2.Setup())
        loaded = pipeline.load_message(setup, Path("setup.txt"))
        plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
        (k,) = plan.phases[0].kernels
        block = 2 * kv_len * head_dim * 2
        waves = math.ceil(batch * kv_heads / SMS)
        stream = waves * (block / SM_BPS + WAVE_S)
        flop = 4 * batch * kv_heads * group * kv_len * head_dim
        assert flop / (0.3 * 989.4e12) < stream
        assert k.compute_s == pytest.approx(stream + OVERHEAD_S, rel=1e-9), text
        q_and_out = 2 * batch * kv_heads * group * head_dim * 2
        cache = batch * kv_heads * block
        assert k.memory_s == pytest.approx((cache + q_and_out) / H200_DRAM_BPS, rel=1e-9)
