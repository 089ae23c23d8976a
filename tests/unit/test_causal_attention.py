"""Causal self-attention from the tiles a fused kernel executes (solver.cost.causal_attention):
the executed share and the waves by hand, a kernel's time through a whole `mapshard run`
against the formula worked out here, and where the model does not apply."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator import llm_common
from generator.build import build_workload
from generator.graph import Pass
from hardware import library
from mapshard import pipeline
from mapshard.fidelity import fit_attention
from mapshard.fidelity.fit import library_system
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost import causal_attention, kernel_times
from solver.cost.causal_attention import CausalAttentionShape


def _plan(attention: str, chip: str):
    text = f'workload {{ attention {{ {attention} }} }} system {{ chip: "{chip}" num_chip: 1 }}'
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))


@pytest.mark.parametrize(
    ("seq_len", "share"),
    [
        (512, 10 * 128 * 128 / 512**2),  # 4 tiles: 4 + 3 + 2 + 1 of 16 = 0.625
        (16384, 128 * 129 / 2 / 128**2),  # 128 tiles: 0.50390625
        (1000, 8 * 9 / 2 * 128 * 128 / 1000**2),  # 8 tiles, the last one padded
        (100, 128 * 128 / 100**2),  # one padded tile runs whole
    ],
)
def test_executed_share_by_hand(seq_len, share):
    assert causal_attention.executed_share(seq_len) == pytest.approx(share, rel=1e-12)


def test_waves_by_hand():
    # 32 sequences x 16 heads x 4 query tiles = 2,048 items over 132 SMs: 15.5 -> 16 waves
    assert causal_attention.waves(CausalAttentionShape(512, 512, 512), 132) == 16
    # one sequence, 16 heads, 16k tokens: 2,048 items again
    assert causal_attention.waves(CausalAttentionShape(16, 16384, 16384), 132) == 16
    # a quarter of the queries on the chip: 512 x 1 tile = 512 items -> 4 waves
    assert causal_attention.waves(CausalAttentionShape(512, 128, 512), 132) == 4


# the chip files' numbers (hardware/chips): 989.4 TFLOP/s BF16 dense, 132 SMs at 1.83 GHz
# on both GH100 chips, per-kernel overhead 2.0 us (H200) and 4.5 us (H100), which a
# kernel's compute_s holds; the causal tile fit 0.955 / 2.25 us forward, 0.71 / 12.25 us
# per backward kernel; exponentials at 16 per clock per SM (CUDA C++ Programming Guide),
# one per executed score forward, half of one in each backward kernel
H200_BF16 = 989.4e12
EXP_PER_S = 132 * 16 * 1.83e9
OVERHEAD_S = {"H200-SXM-141GB": 2.0e-6, "H100-SXM5-80GB": 4.5e-6}


def _plan_with(attention: str, chip: str, attention_kernel: str):
    text = (
        f'workload {{ attention {{ {attention} }} }} system {{ chip: "{chip}" num_chip: 1 }} '
        f'execution {{ attention_kernel: "{attention_kernel}" }}'
    )
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))


def test_a_causal_forward_takes_its_executed_tiles_by_hand():
    plan = _plan("batch: 32 heads: 16 head_dim: 128 q_len: 512", "H200-SXM-141GB")
    (k,) = plan.phases[0].kernels
    flop = 4 * 32 * 512 * 512 * 16 * 128
    scores = 32 * 16 * 512 * 512
    by_hand = flop * 0.625 / (H200_BF16 * 0.955) + scores * 0.625 / EXP_PER_S + 16 * 2.25e-6
    assert k.compute_s == pytest.approx(by_hand + 2.0e-6, rel=1e-9)
    assert k.time_source == "fitted causal attention tiles (cudnn)"
    assert plan.latency_s == pytest.approx(k.compute_s, rel=1e-9)  # compute binds


def test_each_backward_kernel_by_hand():
    plan = _plan("batch: 1 heads: 16 head_dim: 128 q_len: 16384 backward: true", "H200-SXM-141GB")
    flop = 1.25 * 4 * 16384 * 16384 * 16 * 128
    share = 128 * 129 / 2 / 128**2
    exps = 0.5 * 16 * 16384 * 16384 * share
    by_hand = flop * share / (H200_BF16 * 0.71) + exps / EXP_PER_S + 16 * 12.25e-6
    assert len(plan.phases[0].kernels) == 2
    for k in plan.phases[0].kernels:
        assert k.compute_s == pytest.approx(by_hand + 2.0e-6, rel=1e-9)


def test_a_random_family_of_shapes_by_hand():
    """Seeded causal shapes (MHA and GQA, short and long, forward and backward) on both
    GH100 chips: every kernel's compute time is the tile formula worked out here."""
    rng = random.Random(18)
    for _ in range(8):
        chip = rng.choice(["H100-SXM5-80GB", "H200-SXM-141GB"])
        kv_heads = rng.choice([1, 4, 8])
        heads = kv_heads * rng.choice([1, 4])
        b, d, s = rng.choice([1, 2, 8]), rng.choice([64, 128]), rng.choice([200, 1024, 3000])
        backward = rng.random() < 0.5
        text = f"batch: {b} heads: {heads} kv_heads: {kv_heads} head_dim: {d} q_len: {s}"
        plan = _plan(text + f" backward: {str(backward).lower()}", chip)
        tiles = math.ceil(s / 128)
        executed = tiles * (tiles + 1) / 2 * 128 * 128 / s**2
        util, wave_s = (0.71, 12.25e-6) if backward else (0.955, 2.25e-6)
        exps = b * heads * s * s * executed * (0.5 if backward else 1.0)
        flop = 4 * b * s * s * heads * d * (1.25 if backward else 1.0)
        waves = math.ceil(b * heads * tiles / 132)
        for k in plan.phases[0].kernels:
            by_hand = flop * executed / (H200_BF16 * util) + exps / EXP_PER_S + waves * wave_s
            by_hand += OVERHEAD_S[chip]
            assert k.compute_s == pytest.approx(by_hand, rel=1e-9), text


def test_the_model_leaves_decode_and_uncalibrated_chips_alone():
    decode = _plan("batch: 8 heads: 16 head_dim: 128 q_len: 1 kv_len: 4096", "H200-SXM-141GB")
    assert "causal" not in decode.phases[0].kernels[0].time_source
    a100 = _plan("batch: 4 heads: 16 head_dim: 128 q_len: 2048", "A100-SXM4-80GB")
    assert "causal" not in a100.phases[0].kernels[0].time_source
    assert not library.get_chip("A100-SXM4-80GB").accelerator.efficiency.causal_attention


def test_the_fit_recovers_the_numbers_that_made_its_rows():
    """Rows timed by the tile model at known numbers (one per FIT shape, both passes):
    the grid search returns those numbers with zero error."""
    points = []
    for backward in (False, True):
        for s, b in ((512, 32), (2048, 8), (16384, 1)):
            p = fit_attention.AttentionPoint("r", "H200-SXM-141GB", backward, b, 16, 128, s, 1.0)
            made = fit_attention.model_seconds(p, 0.6, 3.0e-6 if backward else 1.5e-6)
            points.append(replace(p, measured_s=made))
    fwd = fit_attention.fit_attention(points[:3])
    bwd = fit_attention.fit_attention(points[3:])
    assert (fwd.util, fwd.wave_us, bwd.util, bwd.wave_us) == (0.6, 1.5, 0.6, 3.0)
    assert fwd.mean_abs_err < 1e-12 and bwd.mean_abs_err < 1e-12


def test_the_setup_picks_the_kernel_family():
    """execution.attention_kernel "fa2" takes the chip's FlashAttention-2 numbers (0.4 of
    the peak, 2.75 us per wave forward); a name no family has is one line naming the field."""
    plan = _plan_with("batch: 4 heads: 16 head_dim: 128 q_len: 4096", "H200-SXM-141GB", "fa2")
    (k,) = plan.phases[0].kernels
    flop = 4 * 4 * 4096 * 4096 * 16 * 128
    share = 32 * 33 / 2 / 32**2
    scores = 4 * 16 * 4096 * 4096 * share
    by_hand = flop * share / (H200_BF16 * 0.4) + scores / EXP_PER_S + 16 * 2.75e-6
    assert k.compute_s == pytest.approx(by_hand + 2.0e-6, rel=1e-9)
    assert k.time_source == "fitted causal attention tiles (fa2)"
    with pytest.raises(SetupError, match='execution.attention_kernel "fa3" names no kernel'):
        _plan_with("batch: 1 heads: 16 head_dim: 128 q_len: 512", "H200-SXM-141GB", "fa3")


@pytest.mark.parametrize(
    "setup",
    [
        "workload { attention { batch: 1 heads: 32 head_dim: 128 q_len: 32768 } } "
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }',
        "workload { attention { batch: 2 heads: 16 head_dim: 128 q_len: 8192 backward: true } } "
        'system { chip: "H200-SXM-141GB" num_chip: 1 }',
        'workload { llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: PREFILL '
        "batch: 1 input_len: 16384 output_len: 1 } } "
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }',
    ],
)
def test_the_search_bound_stays_below_the_plan(setup):
    """The outer search prunes a candidate whose roofline bound reaches the best plan: the
    bound must price a causal kernel no slower than its executed tiles (a windowed one far
    below its non-causal count)."""
    loaded = pipeline.load_message(text_format.Parse(setup, setup_pb2.Setup()), Path("s.txt"))
    plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
    solved = [c for c in plan.choices if c.latency_s is not None]
    assert solved and all(c.lower_bound_s <= c.latency_s * (1 + 1e-9) for c in solved)


def test_a_recomputed_forward_is_priced_as_the_forward():
    """Selective recompute copies the forward attention kernel (Pass.RECOMPUTE): the
    forward's numbers, not the backward's."""
    w = build_workload(
        text_format.Parse(
            "workload { attention { batch: 2 heads: 16 head_dim: 128 q_len: 4096 } }",
            setup_pb2.Setup(),
        ),
        Path("setup.txt"),
        1,
    )
    (fwd,) = w.phases[0].graph.kernels
    chip = library_system("H200-SXM-141GB").chip
    shape = CausalAttentionShape(2 * 16, 4096, 4096)
    times = [
        kernel_times.causal_attention_time(replace(fwd, pass_=p), chip, shape, fwd.flop, "bf16")
        for p in (Pass.FWD, Pass.RECOMPUTE, Pass.BWD)
    ]
    assert times[0] == times[1] and times[2].seconds > times[0].seconds


def test_a_causal_attention_entry_needs_both_passes():
    setup = text_format.Parse(
        "workload { attention { batch: 1 heads: 4 head_dim: 64 q_len: 256 } } "
        'system { chip: "H200-SXM-141GB" num_chip: 1 accelerator { efficiency { '
        'causal_attention { kernel: "cudnn" fwd_util: 0.9 } } } }',
        setup_pb2.Setup(),
    )
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    with pytest.raises(SetupError, match=r'causal_attention\["cudnn"\]\.bwd_util must be > 0'):
        pipeline.resolve(loaded)


def test_a_prefill_chunk_against_its_cache_runs_the_tiles_left_of_its_diagonal():
    # 512 queries, the newest of 4,096 positions: query tile i (positions 3,584 + 128 i ..)
    # runs key tiles 0 .. 28 + i, so 29 + 30 + 31 + 32 = 122 of the 4 x 32 tiles
    plan = _plan("batch: 1 heads: 16 head_dim: 128 q_len: 512 kv_len: 4096", "H200-SXM-141GB")
    (k,) = plan.phases[0].kernels
    share = 122 * 128 * 128 / (512 * 4096)
    flop = 4 * 512 * 4096 * 16 * 128
    scores = 16 * 512 * 4096 * share
    waves = math.ceil(16 * 4 / 132)
    by_hand = flop * share / (H200_BF16 * 0.955) + scores / EXP_PER_S + waves * 2.25e-6
    assert k.compute_s == pytest.approx(by_hand + OVERHEAD_S["H200-SXM-141GB"], rel=1e-9)
    assert k.time_source == "fitted causal attention tiles (cudnn)"


def test_a_chunk_shorter_than_a_tile_keeps_the_plateau():
    """16 queries against 4,096 keys fill no 128-row tile: the tile model would price 8x
    padded rows, so such a kernel keeps the attention plateau."""
    plan = _plan(
        "batch: 8 heads: 32 kv_heads: 8 head_dim: 128 q_len: 16 kv_len: 4096", "H200-SXM-141GB"
    )
    assert "causal" not in plan.phases[0].kernels[0].time_source


def test_the_generators_tile_is_the_cost_models():
    assert llm_common.KEY_TILE == causal_attention.TILE
